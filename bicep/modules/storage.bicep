// Storage account: the work queues (bench-<pool>, bench-<pool>-poison, see adapters/queue.py),
// the Functions host's blobs (AzureWebJobsStorage by identity) and the Flex deployment package.
// Identity only: shared keys (and so SAS and connection strings) are switched off.

param location string
param tags object
param token string
@description('Every agent pool name: one work queue and one poison queue each.')
param pools array
param deploymentContainerName string = 'app-package'

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_35: the Flex Consumption app has no VNet integration in this template, so it reaches the account over the public endpoint; every request needs an Entra ID token (shared keys are off)
  // checkov:skip=CKV_AZURE_59: public endpoint needed for the same reason; access is by RBAC on single queues only
  // checkov:skip=CKV_AZURE_43: false positive: Checkov cannot evaluate the name; 'stbench' + uniqueString() is 20 lowercase letters and digits
  name: 'stbench${token}'
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_GRS'
  }
  properties: {
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    allowBlobPublicAccess: false
    supportsHttpsTrafficOnly: true
    allowCrossTenantReplication: false
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
    encryption: {
      keySource: 'Microsoft.Storage'
      requireInfrastructureEncryption: true
      services: {
        blob: {
          enabled: true
        }
        queue: {
          enabled: true
          keyType: 'Account'
        }
      }
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 7
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

// Large results (per-second timelines with latency histograms, fio's and DiskSpd's own
// outputs, logs): a Cosmos DB document is at most 2 MB. Read and written by the app only.
resource artifactsContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: 'artifacts'
  properties: {
    publicAccess: 'None'
  }
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource workQueues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = [
  for pool in pools: {
    parent: queueService
    name: 'bench-${pool}'
  }
]

resource poisonQueues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = [
  for pool in pools: {
    parent: queueService
    name: 'bench-${pool}-poison'
  }
]

output name string = account.name
output id string = account.id
output queueEndpoint string = account.properties.primaryEndpoints.queue
output blobEndpoint string = account.properties.primaryEndpoints.blob
output deploymentContainerUrl string = '${account.properties.primaryEndpoints.blob}${deploymentContainerName}'
