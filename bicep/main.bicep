// benchsvc on Azure: the API (Function App, Flex Consumption), its storage queues, Cosmos DB,
// Key Vaults, monitoring, and the agent VM pools. Identity only: no keys, no connection
// strings, no secret values in the template. See docs/deploy.md.
targetScope = 'resourceGroup'

@minLength(1)
@maxLength(64)
@description('Environment name (azd: AZURE_ENV_NAME); part of every resource name\'s token.')
param environmentName string

param location string = resourceGroup().location

@description('Extra tags for every resource.')
param extraTags object = {}

@description('Client id of the existing Entra app registration of the API (Bicep cannot create it).')
param apiClientId string

@description('Cosmos DB database name.')
param cosmosDatabaseName string = 'bench'

@description('A single run this many percent worse than its segment is a regression.')
param gatePct string = '10'

@description('Change points smaller than this many percent of the level are not reported.')
param minMagnitudePct string = '2'

@allowed([
  'none'
  'reader'
  'runner'
  'engineer'
  'admin'
])
@description('Role of a signed-in caller whose token has no Bench.* app role; none: 403 on everything but /api/health.')
param defaultRole string = 'none'

// Client ids of the applications people sign in through; Easy Auth admits tokens obtained by
// these and by the agents' identity only (defaultAuthorizationPolicy.allowedApplications).
// Add each pipeline's service principal (its client id) and, if used, Visual Studio Code
// (aebc6443-996d-45c2-90f0-388ff96faa56). Pre-authorize the same clients on the app
// registration (bicep/entra/api-preauthorize.json). docs/deploy.md, "Who may call the API".
@description('Client (application) ids allowed to call the API besides the agents: people\'s tools and pipelines\' service principals.')
param apiClientApplications array = [
  '04b07795-8ddb-461a-bbee-02f9e1bf7b46' // Microsoft Azure CLI (the Azure Developer CLI signs in as it too)
  '1950a258-227b-4e31-a9cf-717495945fc2' // Microsoft Azure PowerShell
]

@allowed([
  'reader'
  'runner'
  'engineer'
  'admin'
])
@description('Role of requests arriving through the bots.')
param botRole string = 'runner'

@description('Create the Teams bot (Azure Bot, single-tenant, the app\'s managed identity, Teams channel on): docs/deploy.md, "The Teams bot".')
param deployTeamsBot bool = false

@description('Generic webhook for notifications (plain URL, no token in it); empty: none.')
param webhookUrl string = ''

@description('Secrets already set in the app Key Vault (teams-webhook-url, webhook-secret, teams-bot-secret, bot-secret); the others stay empty app settings.')
param keyVaultSecrets array = []

// Only the agent vault's network access is a choice. The app vault stays reachable: the Function
// App reads it through Key Vault references, which Flex Consumption does not resolve from a
// network-restricted vault, even with VNet integration (Microsoft Learn, Azure Functions Flex
// Consumption plan hosting, Considerations; this template has no VNet integration either).
@allowed([
  'Enabled'
  'Disabled'
])
@description('Public network access of the agent vault (kv-agt-*). Disabled needs a private endpoint and DNS in the agents\' VNet, not part of this template. The app vault is always Enabled: Flex Consumption cannot resolve Key Vault references from a network-restricted vault.')
param agentKeyVaultPublicNetworkAccess string = 'Enabled'

// Purge protection keeps a deleted vault and its secrets recoverable for the retention period
// and stops anyone, azd down --purge included, from purging it earlier: the same names cannot
// be created again until then. Recover instead (scripts/preflight.py says how), or turn it off
// for throw-away environments. Once on, a vault keeps it (Key Vault does not accept false).
@description('Purge protection on both Key Vaults. false: azd down --purge frees the names at once, but anyone with rights can purge the secrets irrecoverably.')
param keyVaultPurgeProtection bool = true

@description('Linux agent pools: [{name, vmSize, instanceCount, mounts: [{alias, kind: nfs|smb, source, nfs_version, nconnect, rsize, wsize, smb_secret_name}], pricePerHour?}]. With maxCount (and optional minCount, idleSeconds) a pool is elastic: created with capacity 0, the API sets its capacity (README "Agents and pools").')
param pools array = [
  {
    name: 'default'
    vmSize: 'Standard_D4s_v5'
    instanceCount: 1
    mounts: []
  }
]

@description('Benchmark targets the API accepts: [{alias, pool, read_only}] (BENCH_TARGETS).')
param targets array = []

@description('Resource id of an existing subnet for the agent VMs; it must reach the volumes and the internet (packages, API, queue).')
param agentSubnetId string

@description('URL of the benchsvc wheel the agents pip-install (no token in it).')
param agentPackageUrl string

param agentAdminUsername string = 'benchadmin'

@description('SSH public key for the Linux agents\' admin user.')
param agentSshPublicKey string

@description('Encryption at host for agent VMs: needs the subscription feature Microsoft.Compute/EncryptionAtHost registered (scripts/preflight.py checks it before azd provisions).')
param agentEncryptionAtHost bool = true

@description('Also deploy the Windows (DiskSpd) agent pool.')
param deployWindowsPool bool = false

@description('Windows pool: {name, vmSize, instanceCount, mounts: [{alias, path}]}.')
param windowsPool object = {
  name: 'win'
  vmSize: 'Standard_D4s_v5'
  instanceCount: 1
  mounts: []
}

@secure()
@description('Windows agents\' local administrator password; only used with deployWindowsPool.')
param windowsAdminPassword string

var token = toLower(uniqueString(subscription().id, resourceGroup().id, environmentName))
var tags = union(extraTags, { 'azd-env-name': environmentName, application: 'benchsvc' })
var linuxPoolNames = [for p in pools: p.name]
var fixedPools = filter(pools, p => !contains(p, 'maxCount'))
var elasticPools = filter(pools, p => contains(p, 'maxCount'))
// The scale set names agentpool-linux.bicep gives (vmss-<pool>-<token>).
var elasticScaleSets = [for p in elasticPools: 'vmss-${p.name}-${token}']
// BENCH_POOLS (core/fleet/pools.py): a fixed pool declares its size, an elastic one its
// range, idle period and scale set; either may carry the hourly price of its VMs.
var fixedPoolSettings = [
  for p in fixedPools: format('{0}:size={1}{2}', p.name, p.instanceCount, contains(p, 'pricePerHour') ? ':price=${p.pricePerHour}' : '')
]
var elasticPoolSettings = [
  for p in elasticPools: format(
    '{0}:max={1}:min={2}:idle={3}:vmss=vmss-{0}-{4}{5}',
    p.name,
    p.maxCount,
    contains(p, 'minCount') ? p.minCount : 0,
    contains(p, 'idleSeconds') ? p.idleSeconds : 900,
    token,
    contains(p, 'pricePerHour') ? ':price=${p.pricePerHour}' : ''
  )
]
var poolSettings = concat(fixedPoolSettings, elasticPoolSettings, deployWindowsPool ? [windowsPool.name] : [])
// The API's address, known before the app exists (functionapp.bicep names it so): elastic
// pools are created before the role assignments, which the app depends on.
var apiUrlByName = 'https://func-bench-${token}.azurewebsites.net'
var allPools = deployWindowsPool ? concat(linuxPoolNames, [windowsPool.name]) : linuxPoolNames
var apiScope = 'api://${apiClientId}/.default'

module identities 'modules/identities.bicep' = {
  name: 'identities'
  params: {
    location: location
    tags: tags
    token: token
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: tags
    token: token
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    tags: tags
    token: token
    pools: allPools
  }
}

module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  params: {
    location: location
    tags: tags
    token: token
    databaseName: cosmosDatabaseName
  }
}

// Two vaults so that agent VMs, which may read SMB credentials, never see app secrets.
module appVault 'modules/keyvault.bicep' = {
  name: 'keyvault-app'
  params: {
    location: location
    tags: tags
    name: 'kv-app-${token}'
    publicNetworkAccess: 'Enabled'
    purgeProtection: keyVaultPurgeProtection
  }
}

module agentVault 'modules/keyvault.bicep' = {
  name: 'keyvault-agent'
  params: {
    location: location
    tags: tags
    name: 'kv-agt-${token}'
    publicNetworkAccess: agentKeyVaultPublicNetworkAccess
    purgeProtection: keyVaultPurgeProtection
  }
}

module roles 'modules/roleassignments.bicep' = {
  name: 'roleassignments'
  // The app's scaling role is scoped to each elastic pool's scale set: it must exist.
  dependsOn: [
    elasticAgentPools
  ]
  params: {
    elasticScaleSets: elasticScaleSets
    appPrincipalId: identities.outputs.appPrincipalId
    agentPrincipalId: identities.outputs.agentPrincipalId
    storageAccountName: storage.outputs.name
    pools: allPools
    appKeyVaultName: appVault.outputs.name
    agentKeyVaultName: agentVault.outputs.name
    appInsightsName: monitoring.outputs.appInsightsName
    cosmosAccountName: cosmos.outputs.name
    cosmosDatabaseName: cosmos.outputs.databaseName
  }
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  // The app starts with its rights in place (storage, vault, telemetry, Cosmos DB).
  dependsOn: [
    roles
  ]
  params: {
    location: location
    tags: tags
    token: token
    appIdentityId: identities.outputs.appId
    appIdentityClientId: identities.outputs.appClientId
    agentPrincipalIds: [
      identities.outputs.agentPrincipalId
    ]
    storageAccountName: storage.outputs.name
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    queueEndpoint: storage.outputs.queueEndpoint
    blobEndpoint: storage.outputs.blobEndpoint
    cosmosEndpoint: cosmos.outputs.endpoint
    cosmosDatabaseName: cosmos.outputs.databaseName
    appInsightsConnectionString: monitoring.outputs.connectionString
    keyVaultName: appVault.outputs.name
    keyVaultSecrets: keyVaultSecrets
    pools: poolSettings
    targets: targets
    gatePct: gatePct
    minMagnitudePct: minMagnitudePct
    webhookUrl: webhookUrl
    defaultRole: defaultRole
    botRole: botRole
    teamsBot: deployTeamsBot
    apiClientId: apiClientId
    allowedClientApplications: concat([identities.outputs.agentClientId], apiClientApplications)
  }
}

// The Teams bot: its identity is the app's, its endpoint the app's /api/messages.
module teamsBot 'modules/bot.bicep' = if (deployTeamsBot) {
  name: 'teams-bot'
  params: {
    tags: tags
    token: token
    appIdentityId: identities.outputs.appId
    appIdentityClientId: identities.outputs.appClientId
    apiUrl: functionApp.outputs.url
  }
}

module linuxPools 'modules/agentpool-linux.bicep' = [
  for pool in fixedPools: {
    name: 'agentpool-${pool.name}'
    dependsOn: [
      roles
    ]
    params: {
      location: location
      tags: tags
      token: token
      poolName: pool.name
      vmSize: pool.vmSize
      instanceCount: pool.instanceCount
      subnetId: agentSubnetId
      adminUsername: agentAdminUsername
      sshPublicKey: agentSshPublicKey
      agentIdentityId: identities.outputs.agentId
      agentIdentityClientId: identities.outputs.agentClientId
      apiUrl: functionApp.outputs.url
      queueUri: storage.outputs.queueEndpoint
      apiScope: apiScope
      agentPackageUrl: agentPackageUrl
      agentKeyVaultUri: agentVault.outputs.uri
      mounts: pool.mounts
      encryptionAtHost: agentEncryptionAtHost
    }
  }
]

// Elastic pools: created empty; the API sets their capacity (adapters/azure_scaler.py).
module elasticAgentPools 'modules/agentpool-linux.bicep' = [
  for pool in elasticPools: {
    name: 'agentpool-${pool.name}'
    // Capacity 0: no VM boots before the API grows the pool, so no role is needed yet.
    params: {
      location: location
      tags: tags
      token: token
      poolName: pool.name
      vmSize: pool.vmSize
      instanceCount: 0
      subnetId: agentSubnetId
      adminUsername: agentAdminUsername
      sshPublicKey: agentSshPublicKey
      agentIdentityId: identities.outputs.agentId
      agentIdentityClientId: identities.outputs.agentClientId
      apiUrl: apiUrlByName
      queueUri: storage.outputs.queueEndpoint
      apiScope: apiScope
      agentPackageUrl: agentPackageUrl
      agentKeyVaultUri: agentVault.outputs.uri
      mounts: pool.mounts
      encryptionAtHost: agentEncryptionAtHost
    }
  }
]

module windowsAgents 'modules/agentpool-windows.bicep' = if (deployWindowsPool) {
  name: 'agentpool-${windowsPool.name}'
  dependsOn: [
    roles
  ]
  params: {
    location: location
    tags: tags
    token: token
    poolName: windowsPool.name
    vmSize: windowsPool.vmSize
    instanceCount: windowsPool.instanceCount
    subnetId: agentSubnetId
    adminUsername: agentAdminUsername
    adminPassword: windowsAdminPassword
    agentIdentityId: identities.outputs.agentId
    agentIdentityClientId: identities.outputs.agentClientId
    apiUrl: functionApp.outputs.url
    queueUri: storage.outputs.queueEndpoint
    apiScope: apiScope
    agentPackageUrl: agentPackageUrl
    mounts: windowsPool.mounts
    encryptionAtHost: agentEncryptionAtHost
  }
}

output API_URL string = functionApp.outputs.url
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output AGENT_IDENTITY_CLIENT_ID string = identities.outputs.agentClientId
// scripts/preflight.py grant-agent-role (azd postprovision) gives it the API's Bench.Agent role.
output AGENT_PRINCIPAL_ID string = identities.outputs.agentPrincipalId
output APP_IDENTITY_CLIENT_ID string = identities.outputs.appClientId
output QUEUE_URI string = storage.outputs.queueEndpoint
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output APP_KEY_VAULT_NAME string = appVault.outputs.name
output AGENT_KEY_VAULT_NAME string = agentVault.outputs.name
output API_SCOPE string = apiScope
// The Teams app manifest's bot id (scripts/teams_manifest.py); empty without the bot.
output TEAMS_BOT_APP_ID string = deployTeamsBot ? identities.outputs.appClientId : ''

