// Storage account: the work queues (bench-<pool>, bench-<pool>-poison, see adapters/queue.py),
// the Functions host's blobs (AzureWebJobsStorage by identity) and the Flex deployment package.
// Identity only: shared keys (and so SAS and connection strings) are switched off.

param location string
param tags object
param token string
@description('Every agent pool name: one work queue and one poison queue each.')
param pools array
param deploymentContainerName string = 'app-package'
@description('vnetEnabled: no public endpoint; the app and agents come through private endpoints (private-endpoints.bicep).')
param vnetEnabled bool = false
@description('Log Analytics workspace for the diagnostic settings.')
param workspaceId string
@description('Days after it was written that a raw artifact moves to cool storage.')
param rawCoolAfterDays int = 30
@description('Days after it was written that a raw artifact is deleted.')
param rawDeleteAfterDays int = 365

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  // checkov:skip=CKV_AZURE_35: without vnetEnabled the Flex Consumption app and the agents reach the account over its public endpoint (with vnetEnabled: Deny, private endpoints only); every request needs an Entra ID token (shared keys are off)
  // checkov:skip=CKV_AZURE_59: public network access is Disabled with vnetEnabled; without it the public endpoint is needed for the same reason; access is by RBAC on single queues only
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
    publicNetworkAccess: vnetEnabled ? 'Disabled' : 'Enabled'
    networkAcls: {
      defaultAction: vnetEnabled ? 'Deny' : 'Allow'
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

// Raw artifacts (fio's and DiskSpd's own output, fio's per-second and histogram logs: the
// blobs under artifacts/raw/, adapters/blob.py) go cool, then are deleted (core/retention.py).
// A run's figures (timelines, counters, aggregate series under artifacts/runs/) stay.
resource lifecycle 'Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01' = {
  parent: account
  name: 'default'
  properties: {
    policy: {
      rules: [
        {
          enabled: true
          name: 'raw-artifacts'
          type: 'Lifecycle'
          definition: {
            filters: {
              blobTypes: [
                'blockBlob'
              ]
              prefixMatch: [
                'artifacts/raw/'
              ]
            }
            actions: {
              baseBlob: {
                tierToCool: {
                  daysAfterModificationGreaterThan: rawCoolAfterDays
                }
                delete: {
                  daysAfterModificationGreaterThan: rawDeleteAfterDays
                }
              }
            }
          }
        }
      ]
    }
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

// Diagnostic settings: writes and deletes of blobs (artifacts, the deployment package) and
// message deletes (an item done). Reads, and queue writes, are left out: every idle agent
// polls its queue 4 times a second, which would be logged, and paid for, line by line.
resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: blobService
  properties: {
    workspaceId: workspaceId
    logs: [
      {
        category: 'StorageWrite'
        enabled: true
      }
      {
        category: 'StorageDelete'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}

resource queueDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: queueService
  properties: {
    workspaceId: workspaceId
    logs: [
      {
        category: 'StorageDelete'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}

output name string = account.name
output id string = account.id
output queueEndpoint string = account.properties.primaryEndpoints.queue
output blobEndpoint string = account.properties.primaryEndpoints.blob
output deploymentContainerUrl string = '${account.properties.primaryEndpoints.blob}${deploymentContainerName}'
