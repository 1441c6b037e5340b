// vnetEnabled: private endpoints and their private DNS zones, linked to the service's VNet,
// so the Function App (through its VNet integration) and the agents reach Storage (blob,
// queue), Cosmos DB, the agents' Key Vault and the API itself over private addresses. The
// app vault has none: the Function App reads it through Key Vault references, which Flex
// Consumption does not resolve from a network-restricted vault (docs/deploy.md, limits).

param location string
param tags object
param token string
param vnetId string
param subnetId string
param storageAccountId string
param cosmosAccountId string
param agentVaultId string
param functionAppId string
@description('The Azure Files NFS account (files-nfs.bicep), or empty.')
param nfsAccountId string = ''

var nfsEndpoint = {
  name: 'files-nfs'
  target: nfsAccountId
  group: 'file'
  zone: 'privatelink.file.${environment().suffixes.storage}'
}
// Zone names: Microsoft Learn, "Azure Private Endpoint private DNS zone values".
var endpoints = concat(
  [
    { name: 'blob', target: storageAccountId, group: 'blob', zone: 'privatelink.blob.${environment().suffixes.storage}' }
    { name: 'queue', target: storageAccountId, group: 'queue', zone: 'privatelink.queue.${environment().suffixes.storage}' }
    { name: 'cosmos', target: cosmosAccountId, group: 'Sql', zone: 'privatelink.documents.azure.com' }
    { name: 'kv-agent', target: agentVaultId, group: 'vault', zone: 'privatelink.vaultcore.azure.net' }
    { name: 'api', target: functionAppId, group: 'sites', zone: 'privatelink.azurewebsites.net' }
  ],
  empty(nfsAccountId) ? [] : [nfsEndpoint]
)

resource zones 'Microsoft.Network/privateDnsZones@2024-06-01' = [
  for e in endpoints: {
    name: e.zone
    location: 'global'
    tags: tags
  }
]

resource links 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = [
  for (e, i) in endpoints: {
    parent: zones[i]
    name: 'link-bench-${token}'
    location: 'global'
    tags: tags
    properties: {
      registrationEnabled: false
      virtualNetwork: {
        id: vnetId
      }
    }
  }
]

resource privateEndpoints 'Microsoft.Network/privateEndpoints@2024-05-01' = [
  for e in endpoints: {
    name: 'pe-bench-${e.name}-${token}'
    location: location
    tags: tags
    properties: {
      subnet: {
        id: subnetId
      }
      privateLinkServiceConnections: [
        {
          name: e.name
          properties: {
            privateLinkServiceId: e.target
            groupIds: [
              e.group
            ]
          }
        }
      ]
    }
  }
]

resource dnsGroups 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = [
  for (e, i) in endpoints: {
    parent: privateEndpoints[i]
    name: 'default'
    properties: {
      privateDnsZoneConfigs: [
        {
          name: e.name
          properties: {
            privateDnsZoneId: zones[i].id
          }
        }
      ]
    }
  }
]

output zones array = [for (e, i) in endpoints: zones[i].name]
