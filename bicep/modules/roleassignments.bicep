// Every role assignment of the deployment, each scoped to the narrowest resource that works.
// tests/test_bicep_roles.py holds the expected (principal, role, scope) table: widening a scope
// fails it.

param appPrincipalId string
param storageAccountName string
@description('Every pool: the app sends to its work and poison queues, the pool\'s agents receive from its work queue.')
param pools array
@description('Each pool\'s agent identity (principal id), in the order of pools.')
param agentPrincipalIds array
@description('SMB credentials a pool\'s agents may read: [{principalId, secret}], one per secret; each secret must already exist in the agent vault.')
param agentSecretGrants array = []
@description('Names (GUIDs) of the custom roles (roledefinitions.bicep), deployed before this module.')
param queueAgentRoleName string
param poolScalerRoleName string
param appKeyVaultName string
param agentKeyVaultName string
param appInsightsName string
param cosmosAccountName string
param cosmosDatabaseName string
@description('Elastic pools\' scale sets: the app sets their capacity, and nothing else anywhere.')
param elasticScaleSets array = []

// Built-in role definition ids (the same in every tenant).
var roles = {
  // Storage Queue Data Message Sender: add messages (the app enqueues work and poison items).
  queueSender: 'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a'
  // Storage Blob Data Owner: documented minimum for identity-based AzureWebJobsStorage
  // (host locks for timer triggers, key store, creating its containers) and Flex deployment.
  blobOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  // Key Vault Secrets User: read secret values (Key Vault references, SMB credentials).
  kvSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6'
  // Monitoring Metrics Publisher: send telemetry to App Insights with local auth off.
  metricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
  // Cosmos DB Built-in Data Contributor (a Cosmos SQL role, not an Azure RBAC role).
  cosmosDataContributor: '00000000-0000-0000-0000-000000000002'
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' existing = {
  parent: storage
  name: 'default'
}

resource workQueues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' existing = [
  for pool in pools: {
    parent: queueService
    name: 'bench-${pool}'
  }
]

resource poisonQueues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' existing = [
  for pool in pools: {
    parent: queueService
    name: 'bench-${pool}-poison'
  }
]

resource appVault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: appKeyVaultName
}

resource agentVault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: agentKeyVaultName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource cosmos 'Microsoft.DocumentDB/databaseAccounts@2024-11-15' existing = {
  name: cosmosAccountName
}

resource scaleSets 'Microsoft.Compute/virtualMachineScaleSets@2024-07-01' existing = [
  for name in elasticScaleSets: {
    name: name
  }
]

// ---- app identity ---------------------------------------------------------------------

// The app only sends (adapters/queue.py send/send_poison); it neither peeks nor counts in
// production code, so no Queue Data Reader.
resource appSendWork 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (pool, i) in pools: {
    name: guid(workQueues[i].id, appPrincipalId, roles.queueSender)
    scope: workQueues[i]
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.queueSender)
      principalId: appPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

resource appSendPoison 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (pool, i) in pools: {
    name: guid(poisonQueues[i].id, appPrincipalId, roles.queueSender)
    scope: poisonQueues[i]
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.queueSender)
      principalId: appPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]

// The Functions docs require Blob Data Owner on the AzureWebJobsStorage account: the host
// creates its own containers (azure-webjobs-hosts, -secrets), so a container scope would
// not do. It grants blob rights only, not queue rights.
resource appHostBlobs 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, appPrincipalId, roles.blobOwner)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.blobOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource appSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appVault.id, appPrincipalId, roles.kvSecretsUser)
  scope: appVault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.kvSecretsUser)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource appTelemetry 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, appPrincipalId, roles.metricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.metricsPublisher)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Cosmos data plane RBAC, scoped to the database (not the account). Agents get none.
resource appCosmos 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: cosmos
  name: guid(cosmos.id, cosmosDatabaseName, appPrincipalId, roles.cosmosDataContributor)
  properties: {
    roleDefinitionId: '${cosmos.id}/sqlRoleDefinitions/${roles.cosmosDataContributor}'
    principalId: appPrincipalId
    scope: '${cosmos.id}/dbs/${cosmosDatabaseName}'
  }
}

// ---- agent identities: one per pool ------------------------------------------------------

resource agentWork 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (pool, i) in pools: {
    name: guid(workQueues[i].id, agentPrincipalIds[i], queueAgentRoleName)
    scope: workQueues[i]
    properties: {
      // Role definitions live at subscription level even when deployed from a resource group.
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', queueAgentRoleName)
      principalId: agentPrincipalIds[i]
      principalType: 'ServicePrincipal'
    }
  }
]

// Agents send their traces to Application Insights (local auth is off there).
resource agentTelemetry 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (pool, i) in pools: {
    name: guid(appInsights.id, agentPrincipalIds[i], roles.metricsPublisher)
    scope: appInsights
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.metricsPublisher)
      principalId: agentPrincipalIds[i]
      principalType: 'ServicePrincipal'
    }
  }
]

// Agents read SMB share credentials at boot from their own vault, which holds nothing of
// the app's; each pool's identity reads only the secrets its own mounts name (an
// assignment per secret: Key Vault RBAC takes a secret as scope).
resource agentSecretScopes 'Microsoft.KeyVault/vaults/secrets@2023-07-01' existing = [
  for grant in agentSecretGrants: {
    parent: agentVault
    name: grant.secret
  }
]

resource agentSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (grant, i) in agentSecretGrants: {
    name: guid(agentSecretScopes[i].id, grant.principalId, roles.kvSecretsUser)
    scope: agentSecretScopes[i]
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.kvSecretsUser)
      principalId: grant.principalId
      principalType: 'ServicePrincipal'
    }
  }
]

// Elastic pools: the app sets the capacity of each pool's scale set (adapters/azure_scaler.py).
resource appScalePools 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (name, i) in elasticScaleSets: {
    name: guid(scaleSets[i].id, appPrincipalId, poolScalerRoleName)
    scope: scaleSets[i]
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', poolScalerRoleName)
      principalId: appPrincipalId
      principalType: 'ServicePrincipal'
    }
  }
]
