"""The deployment's role assignments (bicep/, read as tests/test_bicep.py reads it): exactly
the least-privilege table, defined and assigned only by the role modules, each identity to its
own principal, the custom roles' actions."""

from __future__ import annotations

from typing import Any

from tests.bicep_tree import BICEP, BICEP_FILES, Node, body, module, parse, resources_of_type

BUILT_IN_ROLES = {
    "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a": "Storage Queue Data Message Sender",
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": "Storage Blob Data Owner",
    "4633458b-17de-408a-b874-0445c86b69e6": "Key Vault Secrets User",
    "3913510d-42f4-4e42-8a64-420c390055eb": "Monitoring Metrics Publisher",
    "00000000-0000-0000-0000-000000000002": "Cosmos DB Built-in Data Contributor",
}


CUSTOM_QUEUE_ROLE = "custom: queue agent"


CUSTOM_SCALER_ROLE = "custom: pool scaler"


# (principal, role, scope): the whole table; widening a scope or adding a role fails here.
EXPECTED_ASSIGNMENTS = {
    ("app", "Storage Queue Data Message Sender", "queue: bench-<pool>"),
    ("app", "Storage Queue Data Message Sender", "queue: bench-<pool>-poison"),
    ("app", "Storage Blob Data Owner", "storage account"),
    ("app", "Key Vault Secrets User", "key vault: app"),
    ("app", "Monitoring Metrics Publisher", "application insights"),
    ("app", "Cosmos DB Built-in Data Contributor", "cosmos database"),
    # Each pool's own identity: its own queue, and only the secrets its own mounts name.
    ("agent", CUSTOM_QUEUE_ROLE, "queue: bench-<pool>"),
    ("agent", "Key Vault Secrets User", "key vault secret: the pool's SMB credentials"),
    # Each pool's identity sends its agents' traces (issue 31).
    ("agent", "Monitoring Metrics Publisher", "application insights"),
    # Elastic pools (issue 18): the app sets the capacity of each one's scale set, only.
    ("app", CUSTOM_SCALER_ROLE, "scale set: elastic pool"),
}


PRINCIPALS = {
    "appPrincipalId": "app",
    "agentPrincipalIds[i]": "agent",
    "grant.principalId": "agent",
}


def _principal(node: Node) -> str:
    if isinstance(node, str):
        return PRINCIPALS[node]
    op = node["operator"]
    a, b = op["operands"]["operand_1"], op["operands"]["operand_2"]
    return PRINCIPALS[f"{a}[{b}]" if op["type"] == "index_accessor" else f"{a}.{b}"]


def _symbol(node: Node) -> str:
    """The resource symbol of a scope: `x` or `x[i]`."""
    if isinstance(node, str):
        return node
    op = node["operator"]
    assert op["type"] == "index_accessor", node
    name: str = op["operands"]["operand_1"]
    return name


def _scope_kind(tree: dict[str, Any], symbol: str) -> str:
    resource = tree["resources"][symbol]
    assert resource["existing"], f"{symbol}: scope must be a resource of its own"
    rtype: str = resource["type"]
    name: str = body(resource)["name"]
    kinds = {
        "Microsoft.Storage/storageAccounts": "storage account",
        "Microsoft.Insights/components": "application insights",
    }
    if rtype == "Microsoft.Storage/storageAccounts/queueServices/queues":
        return "queue: " + name.replace("${pool}", "<pool>")
    if rtype == "Microsoft.Compute/virtualMachineScaleSets":
        assert name == "name" and resource["config"]["loop_type"]["detail"] == {
            "item_name": "name",
            "array_name": "elasticScaleSets",
        }, resource
        return "scale set: elastic pool"
    if rtype == "Microsoft.KeyVault/vaults":
        return {"appKeyVaultName": "key vault: app", "agentKeyVaultName": "key vault: agent"}[name]
    if rtype == "Microsoft.KeyVault/vaults/secrets":
        # A secret of the agent vault, one per grant: the pool's own mounts' secrets.
        assert body(resource)["parent"] == "agentVault"
        assert resource["config"]["loop_type"]["detail"]["array_name"] == "agentSecretGrants"
        return "key vault secret: the pool's SMB credentials"
    return kinds[rtype]


def _role(tree: dict[str, Any], definition: Node) -> str:
    roles = tree["variables"]["roles"]["value"]
    fn = definition["function"]
    assert fn["type"] == "subscription_resource_id", definition
    assert fn["parameters"]["resource_type"] == "Microsoft.Authorization/roleDefinitions"
    name = fn["parameters"]["resource_name_1"]
    # The custom roles (roledefinitions.bicep), by the names main passes from its outputs.
    custom = {"queueAgentRoleName": CUSTOM_QUEUE_ROLE, "poolScalerRoleName": CUSTOM_SCALER_ROLE}
    if isinstance(name, str):
        return custom[name]
    ref = name["operator"]["operands"]
    assert ref["operand_1"] == "roles"
    return BUILT_IN_ROLES[roles[ref["operand_2"]]]


def found_assignments() -> set[tuple[str, str, str]]:
    tree = module("roleassignments")
    found = set()
    for name, resource in resources_of_type(
        tree, "Microsoft.Authorization/roleAssignments"
    ).items():
        decl = body(resource)
        assert decl["name"]["function"]["type"] == "guid", f"{name}: name must be guid(...)"
        assert "scope" in decl, f"{name}: no scope means the whole resource group"
        props = decl["properties"]
        found.add(
            (
                _principal(props["principalId"]),
                _role(tree, props["roleDefinitionId"]),
                _scope_kind(tree, _symbol(decl["scope"])),
            )
        )
    for name, resource in resources_of_type(
        tree, "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments"
    ).items():
        decl = body(resource)
        assert decl["name"]["function"]["type"] == "guid", f"{name}: name must be guid(...)"
        props = decl["properties"]
        assert props["scope"] == "${cosmos.id}/dbs/${cosmosDatabaseName}", name
        role_id = props["roleDefinitionId"]
        assert role_id == "${cosmos.id}/sqlRoleDefinitions/${roles.cosmosDataContributor}"
        role = BUILT_IN_ROLES[tree["variables"]["roles"]["value"]["cosmosDataContributor"]]
        found.add((PRINCIPALS[props["principalId"]], role, "cosmos database"))
    return found


def test_role_assignments_are_exactly_the_expected_least_privilege_table() -> None:
    assert found_assignments() == EXPECTED_ASSIGNMENTS


def test_only_the_role_modules_define_and_assign_roles() -> None:
    for path in BICEP_FILES:
        types = {r["type"] for r in parse(path).get("resources", {}).values()}
        if path.name != "roleassignments.bicep":
            assert not any("roleAssignments" in t for t in types), path
        if path.name != "roledefinitions.bicep":
            assert not any("roleDefinitions" in t for t in types), path


def test_custom_roles_are_defined_first_and_assigned_after_cosmos_db() -> None:
    """A role definition replicates with a delay: an assignment in the same deployment can
    fail with RoleDefinitionDoesNotExist on the first azd up. The definitions are a module
    of their own that waits for nothing; the assignments take their names from its outputs
    (so wait for it) and the Cosmos DB account's (minutes later)."""
    main = parse(BICEP / "main.bicep")["modules"]
    definitions = body(main["roleDefinitions"])
    assert "dependsOn" not in definitions and "params" not in definitions
    roles = body(main["roles"])["params"]
    for name in ("queueAgentRoleName", "poolScalerRoleName"):
        assert roles[name]["operator"]["operands"]["operand_1"] == "roleDefinitions"
    assert roles["cosmosAccountName"]["operator"]["operands"]["operand_1"] == "cosmos"
    assert not resources_of_type(
        module("roleassignments"), "Microsoft.Authorization/roleDefinitions"
    )


def test_main_passes_each_identity_to_its_own_principal() -> None:
    params = body(parse(BICEP / "main.bicep")["modules"]["roles"])["params"]
    accessor = params["appPrincipalId"]["operator"]["operands"]
    assert accessor["operand_1"] == "identities"
    assert accessor["operand_2"]["operator"]["operands"] == {
        "operand_1": "outputs",
        "operand_2": "appPrincipalId",
    }
    # Every pool's identity, in the order of the pools whose queues it is scoped to.
    agents = params["agentPrincipalIds"]["function"]
    assert agents["type"] == "map"
    assert "'agents'" in str(agents["parameters"]["arg_1"])
    assert params["pools"] == "allPools"
    assert body(parse(BICEP / "main.bicep")["modules"]["identities"])["params"]["pools"] == (
        "allPools"
    )


def test_the_agents_custom_role_can_only_process_messages_in_this_resource_group() -> None:
    tree = module("roledefinitions")
    props = body(tree["resources"]["queueAgentRole"])["properties"]
    (permissions,) = props["permissions"]
    prefix = "Microsoft.Storage/storageAccounts/queueServices/queues/messages/"
    assert sorted(permissions["dataActions"]) == sorted(
        prefix + a for a in ("read", "write", "delete", "process/action")
    )
    assert permissions["actions"] == []
    (scope,) = props["assignableScopes"]
    accessor = scope["operator"]["operands"]
    assert accessor["operand_1"]["function"]["type"] == "resource_group"
    assert accessor["operand_2"] == "id"


def test_the_apps_scaler_role_can_only_read_and_write_scale_sets() -> None:
    tree = module("roledefinitions")
    props = body(tree["resources"]["poolScalerRole"])["properties"]
    (permissions,) = props["permissions"]
    assert sorted(permissions["actions"]) == [
        "Microsoft.Compute/virtualMachineScaleSets/read",
        "Microsoft.Compute/virtualMachineScaleSets/write",
    ]
    assert permissions["dataActions"] == [] and permissions["notActions"] == []
    (scope,) = props["assignableScopes"]
    assert scope["operator"]["operands"]["operand_1"]["function"]["type"] == "resource_group"


def test_elastic_pools_are_created_empty_before_the_app_may_scale_them() -> None:
    main = parse(BICEP / "main.bicep")["modules"]
    elastic = body(main["elasticAgentPools"])["params"]
    # 0 when new; on a redeploy the capacity the API set (elasticCapacitiesJson, which
    # scripts/preflight.py preprovision records): agents at work are not scaled away.
    count = elastic["instanceCount"]["operator"]
    assert count["type"] == "conditional" and count["operands"]["false_value"] == 0
    assert count["operands"]["true_value"]["operator"]["operands"] == {
        "operand_1": "elasticCapacities",
        "operand_2": "vmss-${pool.name}-${token}",
    }
    fixed = body(main["linuxPools"])["params"]
    assert fixed["instanceCount"] != 0  # fixed pools keep their count
    # The role assignment on a scale set needs the scale set: roles come after them.
    assert "elasticAgentPools" in str(body(main["roles"]).get("dependsOn"))
