// An Azure Files NFS 4.1 share to benchmark (nfsShareGiB > 0, vnetEnabled): a premium
// FileStorage account reachable only through its private endpoint in the service's VNet.
// NFS shares exist on premium (SSD) file shares only, speak NFS 4.1 only, and take no
// encryption in transit on the SMB sense: the account's "secure transfer required" must be
// off for NFS to mount, the network (private endpoint, no public access) is the boundary
// (Microsoft Learn, "NFS file shares in Azure Files", "Mount NFS Azure file share on
// Linux"). Agents mount it with vers=4.1 and nconnect=4 (agentpool-linux.bicep).

param location string
param tags object
param token string
@minValue(100)
@description('Provisioned size, GiB (premium shares: 100 GiB at least; IOPS and throughput grow with it).')
param quotaGiB int
param shareName string = 'bench'

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_3: NFS 4.1 shares need secure transfer off (they have no TLS on the wire); the account has no public endpoint, only a private endpoint in the service's VNet
  // checkov:skip=CKV_AZURE_33: a FileStorage account has no queue service to log
  // checkov:skip=CKV_AZURE_206: premium file shares offer LRS and ZRS only; a benchmark target needs no geo-replication
  // checkov:skip=CKV2_AZURE_1: Microsoft-managed keys; the share holds benchmark data only
  // checkov:skip=CKV2_AZURE_38: soft delete keeps deleted shares for days of premium capacity cost; benchmark data is disposable
  // checkov:skip=CKV2_AZURE_40: shared keys are off (allowSharedKeyAccess false)
  // checkov:skip=CKV2_AZURE_41: no SAS: shared keys are off
  // checkov:skip=CKV2_AZURE_33: the private endpoint is in private-endpoints.bicep
  // checkov:skip=CKV_AZURE_43: false positive: Checkov cannot evaluate the name; 'stnfs' + uniqueString() is 18 lowercase letters and digits
  name: 'stnfs${token}'
  location: location
  tags: tags
  kind: 'FileStorage'
  sku: {
    name: 'Premium_LRS'
  }
  properties: {
    supportsHttpsTrafficOnly: false
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    minimumTlsVersion: 'TLS1_2'
    publicNetworkAccess: 'Disabled'
    networkAcls: {
      defaultAction: 'Deny'
      bypass: 'AzureServices'
    }
  }
}

resource fileService 'Microsoft.Storage/storageAccounts/fileServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource share 'Microsoft.Storage/storageAccounts/fileServices/shares@2023-05-01' = {
  parent: fileService
  name: shareName
  properties: {
    enabledProtocols: 'NFS'
    rootSquash: 'NoRootSquash'
    shareQuota: quotaGiB
  }
}

output id string = account.id
// The source an agent mounts (and /proc/self/mountinfo shows): <account>.file.<suffix>:/<account>/<share>.
output source string = '${account.name}.file.${environment().suffixes.storage}:/${account.name}/${share.name}'
