// User-assigned managed identities: one for the Function App, one shared by the agent pools.
// Created first so that role assignments exist before the app and the VMs start.

param location string
param tags object
param token string

resource app 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-bench-app-${token}'
  location: location
  tags: tags
}

resource agent 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-bench-agent-${token}'
  location: location
  tags: tags
}

output appId string = app.id
output appClientId string = app.properties.clientId
output appPrincipalId string = app.properties.principalId
output agentId string = agent.id
output agentClientId string = agent.properties.clientId
output agentPrincipalId string = agent.properties.principalId
