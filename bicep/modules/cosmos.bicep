// Cosmos DB (NoSQL, serverless), Entra ID only: keys cannot be used for data or metadata.
// Containers and partition keys as adapters/cosmos.py CONTAINERS.

param location string
param tags object
param token string
param databaseName string

@description('vnetEnabled: no public endpoint; the app comes through its private endpoint.')
param vnetEnabled bool = false
@description('Log Analytics workspace for the diagnostic settings.')
param workspaceId string

@description('Seconds a bot activity id is remembered (replay protection).')
param activityTtlSeconds int = 86400
@description('Seconds after an agent\'s last heartbeat that its registry record expires.')
param agentTtlSeconds int = 2592000
@allowed([
  'Continuous7Days'
  'Continuous30Days'
])
@description('Continuous backup: point-in-time restore within the last 7 or 30 days (docs/operations.md).')
param continuousBackupTier string = 'Continuous7Days'

@description('Seconds an item\'s live samples are kept after their last write (a live view only).')
param liveTtlSeconds int = 86400

// Bulky, never-queried parts of result and aggregate documents stay out of the index
// (fio's raw JSON, per-second series, latency histograms): cheaper writes, same queries
// (results and aggregates are read by run_id only; see adapters/cosmos.py).
var etag = { path: '/"_etag"/?' }
var defaultExcluded = [etag]
var resultExcluded = [
  etag
  { path: '/raw/*' }
  { path: '/series/*' }
  { path: '/read/clat_bins_ns/*' }
  { path: '/write/clat_bins_ns/*' }
  { path: '/read/clat_percentiles_ns/*' }
  { path: '/write/clat_percentiles_ns/*' }
  { path: '/host/*' }
  { path: '/mounts/*' }
  { path: '/inline_timeline/?' }
]
var aggregateExcluded = [
  etag
  { path: '/series/*' }
  { path: '/per_client/*' }
]

var containers = [
  { name: 'runs', pk: '/id', excluded: defaultExcluded }
  { name: 'items', pk: '/run_id', excluded: defaultExcluded }
  { name: 'results', pk: '/run_id', excluded: resultExcluded }
  { name: 'aggregates', pk: '/run_id', excluded: aggregateExcluded }
  { name: 'series', pk: '/series_key', excluded: defaultExcluded }
  { name: 'regressions', pk: '/series_key', excluded: defaultExcluded }
  { name: 'schedules', pk: '/id', excluded: defaultExcluded }
  { name: 'targets', pk: '/id', excluded: defaultExcluded }
  { name: 'ticks', pk: '/id', excluded: defaultExcluded }
]

resource account 'Microsoft.DocumentDB/databaseAccounts@2024-11-15' = {
  // checkov:skip=CKV_AZURE_101: public network access is Disabled with vnetEnabled; without it the Flex app's outbound addresses are not fixed, so the public endpoint stays open; keys are disabled, only Entra ID with database-scoped RBAC gets in
  // checkov:skip=CKV_AZURE_99: no IP filter for the same reason (with vnetEnabled, no public endpoint at all)
  name: 'cosmos-bench-${token}'
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: false
      }
    ]
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    capabilities: [
      {
        name: 'EnableServerless'
      }
    ]
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: vnetEnabled ? 'Disabled' : 'Enabled'
    // Point-in-time restore of the account into a new one (docs/operations.md, "Restore").
    backupPolicy: {
      type: 'Continuous'
      continuousModeProperties: {
        tier: continuousBackupTier
      }
    }
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2024-11-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
  }
}

resource sqlContainers 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = [
  for c in containers: {
    parent: database
    name: c.name
    properties: {
      resource: {
        id: c.name
        partitionKey: {
          paths: [
            c.pk
          ]
          kind: 'Hash'
        }
        indexingPolicy: {
          indexingMode: 'consistent'
          automatic: true
          includedPaths: [
            {
              path: '/*'
            }
          ]
          excludedPaths: c.excluded
        }
      }
    }
  }
]

// Bot activity ids (replay protection) only need remembering for a day: they age out.
resource activities 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: 'activities'
  properties: {
    resource: {
      id: 'activities'
      partitionKey: {
        paths: [
          '/id'
        ]
        kind: 'Hash'
      }
      defaultTtl: activityTtlSeconds
    }
  }
}

// Each running item's last minute of live samples, rewritten every second (core/runs/live.py):
// only run_id is indexed (a run's are read by partition; the samples never are), so each
// write costs what its size does; the TTL drops them once the run is over.
resource live 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: 'live'
  properties: {
    resource: {
      id: 'live'
      partitionKey: {
        paths: [
          '/run_id'
        ]
        kind: 'Hash'
      }
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: [
          {
            path: '/run_id/?'
          }
        ]
        excludedPaths: [
          {
            path: '/*'
          }
        ]
      }
      defaultTtl: liveTtlSeconds
    }
  }
}

// The agent registry: each agent rewrites its record at every heartbeat, so a record
// expires only once its agent has been silent that long (core/retention.py).
resource agents 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: 'agents'
  properties: {
    resource: {
      id: 'agents'
      partitionKey: {
        paths: [
          '/id'
        ]
        kind: 'Hash'
      }
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: [
          {
            path: '/*'
          }
        ]
        excludedPaths: defaultExcluded
      }
      defaultTtl: agentTtlSeconds
    }
  }
}

// The Teams bot's conversations: series subscriptions stay; a run's thread carries a ttl of
// its own once its result is posted (a finished delivery, core/retention.py). defaultTtl -1:
// TTL on, and only documents with a ttl expire.
resource conversations 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: 'conversations'
  properties: {
    resource: {
      id: 'conversations'
      partitionKey: {
        paths: [
          '/id'
        ]
        kind: 'Hash'
      }
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: [
          {
            path: '/*'
          }
        ]
        excludedPaths: defaultExcluded
      }
      defaultTtl: -1
    }
  }
}

// Who changed the account (control plane) and every data request the app made.
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: account
  properties: {
    workspaceId: workspaceId
    logAnalyticsDestinationType: 'Dedicated'
    logs: [
      {
        category: 'ControlPlaneRequests'
        enabled: true
      }
      {
        category: 'DataPlaneRequests'
        enabled: true
      }
    ]
  }
}

output name string = account.name
output id string = account.id
output endpoint string = account.properties.documentEndpoint
output databaseName string = database.name
