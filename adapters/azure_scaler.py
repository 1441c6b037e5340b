"""Elastic pools in Azure (core.fleet.scaling.PoolScaler): a pool's capacity is its agents'
scale set's, read and set through azure-mgmt-compute with the app's managed identity.

The identity holds one role per elastic pool, scoped to that scale set only (Bicep:
``poolScalerRole`` in bicep/modules/roleassignments.bicep): read it and write it. Only the
SKU's capacity is ever sent (a PATCH of ``sku.capacity``, the same SKU name and tier), and
the call returns once Azure has accepted it: the VMs boot and their agents register on
their own, which the service watches in the registry.
"""

from __future__ import annotations

from collections.abc import Mapping

from azure.core.credentials import TokenCredential
from azure.core.exceptions import AzureError
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute.models import Sku, VirtualMachineScaleSetUpdate

from core.errors import StoreUnavailable
from core.fleet.pools import PoolConfig


def scale_sets(pools: tuple[PoolConfig, ...]) -> dict[str, str]:
    """Elastic pool -> its scale set's name (pools without ``vmss`` cannot be scaled)."""
    missing = [p.name for p in pools if p.elastic and not p.vmss]
    if missing:
        raise ValueError(f"BENCH_POOLS: elastic pools without vmss: {', '.join(missing)}")
    return {p.name: p.vmss for p in pools if p.elastic and p.vmss}


def capacity_update(sku: Sku | None, capacity: int) -> VirtualMachineScaleSetUpdate:
    """The PATCH body: the SKU as it is, with the new capacity; nothing else."""
    if sku is None or not sku.name:
        raise ValueError("the scale set has no SKU to scale")
    return VirtualMachineScaleSetUpdate(sku=Sku(name=sku.name, tier=sku.tier, capacity=capacity))


class AzureScaler:
    def __init__(
        self,
        credential: TokenCredential,
        subscription_id: str,
        resource_group: str,
        sets: Mapping[str, str],
    ) -> None:
        self._client = ComputeManagementClient(credential, subscription_id)
        self._group = resource_group
        self._sets = dict(sets)

    def _name(self, pool: str) -> str:
        try:
            return self._sets[pool]
        except KeyError:
            raise ValueError(f"pool {pool} is not elastic") from None

    def capacity(self, pool: str) -> int:
        try:
            vmss = self._client.virtual_machine_scale_sets.get(self._group, self._name(pool))
        except AzureError as e:
            raise StoreUnavailable(f"scale set of pool {pool}: {e}") from e
        return int(vmss.sku.capacity or 0) if vmss.sku else 0

    def set_capacity(self, pool: str, capacity: int) -> None:
        name = self._name(pool)
        try:
            vmss = self._client.virtual_machine_scale_sets.get(self._group, name)
            # Accepted is enough: the VMs register in the registry when they are up.
            self._client.virtual_machine_scale_sets.begin_update(
                self._group, name, capacity_update(vmss.sku, capacity)
            )
        except AzureError as e:
            raise StoreUnavailable(f"scaling pool {pool} to {capacity}: {e}") from e
