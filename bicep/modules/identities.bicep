// User-assigned managed identities: one for the Function App, and one per agent pool, so an
// agent can receive from its own pool's queue and read its own pool's secrets only.
// Created first so that role assignments exist before the app and the VMs start.

param location string
param tags object
param token string
@description('Every agent pool name (Linux and Windows): one identity each.')
param pools array

resource app 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-bench-app-${token}'
  location: location
  tags: tags
}

resource agents 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = [
  for pool in pools: {
    name: 'id-bench-agent-${pool}-${token}'
    location: location
    tags: union(tags, { 'bench-pool': pool })
  }
]

output appId string = app.id
output appClientId string = app.properties.clientId
output appPrincipalId string = app.properties.principalId
// In the order of `pools`: {pool, id, clientId, principalId}.
output agents array = [
  for (pool, i) in pools: {
    pool: pool
    id: agents[i].id
    clientId: agents[i].properties.clientId
    principalId: agents[i].properties.principalId
  }
]
