// benchsvc on Azure: the API (Function App, Flex Consumption), its storage queues, Cosmos DB,
// Key Vaults, monitoring, the API's app registration, optionally a private network, and the
// agent VM pools. Identity only: no keys, no connection strings, no secret values in the
// template. Every parameter has a default or comes from azd's own values, so
// `azd up --no-prompt` asks nothing (tests/test_bicep_deploy.py). See docs/deploy.md.
targetScope = 'resourceGroup'

@minLength(1)
@maxLength(64)
@description('Environment name (azd: AZURE_ENV_NAME); part of every resource name\'s token.')
param environmentName string

// The regions that offer Flex Consumption, as Microsoft's Flex Consumption azd samples list
// them (remote-mcp-functions-python, infra/main.bicep); scripts/preflight.py also asks
// `az functionapp list-flexconsumption-locations`, which is the live answer.
@minLength(1)
@allowed([
  'australiaeast'
  'australiasoutheast'
  'brazilsouth'
  'canadacentral'
  'centralindia'
  'centralus'
  'eastasia'
  'eastus'
  'eastus2'
  'eastus2euap'
  'francecentral'
  'germanywestcentral'
  'italynorth'
  'japaneast'
  'koreacentral'
  'northcentralus'
  'northeurope'
  'norwayeast'
  'southafricanorth'
  'southcentralus'
  'southeastasia'
  'southindia'
  'spaincentral'
  'swedencentral'
  'uaenorth'
  'uksouth'
  'ukwest'
  'westcentralus'
  'westeurope'
  'westus'
  'westus2'
  'westus3'
])
@metadata({
  azd: {
    type: 'location'
  }
})
@description('Region of every resource; one that offers Flex Consumption (azd: AZURE_LOCATION).')
param location string

@description('Extra tags for every resource.')
param extraTags object = {}

@description('Client id of an existing app registration of the API (the manual path, docs/deploy.md step 3b). Empty: the template creates it with the Microsoft Graph Bicep extension.')
param apiClientId string = ''

@description('Object id of the person deploying (azd: AZURE_PRINCIPAL_ID): Bench.Admin on a registration the template creates; empty: nobody.')
param deployerPrincipalId string = ''

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
// these, by the API's own registration (the web UI's sign-in) and by the agents' identities
// only (defaultAuthorizationPolicy.allowedApplications). Add each pipeline's service
// principal (its client id) and, if used, Visual Studio Code
// (aebc6443-996d-45c2-90f0-388ff96faa56). The same clients are pre-authorized on the app
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

@allowed([
  'Enabled'
  'Disabled'
])
@description('Public network access of the agent vault (kv-agt-*) without vnetEnabled; Disabled then needs your own private endpoint and DNS. With vnetEnabled it is Disabled and reached through the template\'s private endpoint. The app vault is always Enabled: Flex Consumption cannot resolve Key Vault references from a network-restricted vault.')
param agentKeyVaultPublicNetworkAccess string = 'Enabled'

// Purge protection keeps a deleted vault and its secrets recoverable for the retention period
// and stops anyone, azd down --purge included, from purging it earlier: the same names cannot
// be created again until then. Recover instead (scripts/preflight.py says how), or turn it off
// for throw-away environments. Once on, a vault keeps it (Key Vault does not accept false).
@description('Purge protection on both Key Vaults. false: azd down --purge frees the names at once, but anyone with rights can purge the secrets irrecoverably.')
param keyVaultPurgeProtection bool = true

@description('The service\'s own virtual network: the Function App\'s VNet integration, private endpoints and DNS for Storage, Cosmos DB, the agents\' vault and the API, and a subnet for the agents (azd: BENCH_VNET_ENABLED).')
param vnetEnabled bool = false

@description('Address space of that virtual network: /24 for the app, /24 for private endpoints, /22 for agents.')
param vnetAddressPrefix string = '10.40.0.0/16'

@minValue(0)
@description('With vnetEnabled: an Azure Files NFS 4.1 share of this many GiB (at least 100) to benchmark; 0: none (azd: BENCH_NFS_SHARE_GIB).')
param nfsShareGiB int = 0

@description('Linux agent pools, a JSON array (azd: BENCH_POOLS_JSON): [{name, vmSize, instanceCount, mounts: [{alias, kind: nfs|smb, source, nfs_version, nconnect, rsize, wsize, smb_secret_name}], pricePerHour?}]. With maxCount (and optional minCount, idleSeconds) a pool is elastic. Default: no pool (bicep/examples/pools.json has samples).')
param poolsJson string = '[]'

@description('Benchmark targets the API accepts, a JSON array (azd: BENCH_TARGETS_JSON): [{alias, pool, read_only}] (BENCH_TARGETS).')
param targetsJson string = '[]'

@description('Current capacity of each elastic pool\'s scale set, a JSON object {scale set name: capacity}: a redeploy keeps it instead of setting 0 under running agents. scripts/preflight.py preprovision records it (azd: BENCH_ELASTIC_CAPACITIES).')
param elasticCapacitiesJson string = '{}'

@description('Resource id of an existing subnet for the agent VMs when vnetEnabled is off; it must reach the volumes and the internet (packages, API, queue). Needed only when a pool is deployed.')
param agentSubnetId string = ''

@description('URL of the benchsvc wheel the agents pip-install (no token in it). Needed only when a pool is deployed.')
param agentPackageUrl string = ''

param agentAdminUsername string = 'benchadmin'

@description('SSH public key for the Linux agents\' admin user. Needed only when a Linux pool is deployed.')
param agentSshPublicKey string = ''

@description('Encryption at host for agent VMs: needs the subscription feature Microsoft.Compute/EncryptionAtHost registered (scripts/preflight.py checks it before azd provisions).')
param agentEncryptionAtHost bool = true

@description('The Windows (DiskSpd) pool, a JSON object (azd: BENCH_WINDOWS_POOL_JSON): {name, vmSize, instanceCount, mounts: [{alias, path}]}. Empty: no Windows pool.')
param windowsPoolJson string = ''

// Empty is not a password: the Windows pool module requires 12 characters, so a Windows pool
// without one stops the deployment before any VM exists (and the preflight says so first).
@secure()
@description('Windows agents\' local administrator password (azd: BENCH_WINDOWS_ADMIN_PASSWORD); needed only with a Windows pool.')
param windowsAdminPassword string = ''

// ---- operations: retention, backup, alerts (docs/operations.md; core/retention.py)

@allowed([
  'Continuous7Days'
  'Continuous30Days'
])
@description('Cosmos DB continuous backup tier: point-in-time restore within the last 7 days (no charge for the backup storage) or 30 days (azd: BENCH_COSMOS_BACKUP_TIER).')
param cosmosBackupTier string = 'Continuous7Days'

@minValue(1)
@description('Days after it was written that a raw artifact (fio or DiskSpd output, fio logs) moves to cool storage (azd: BENCH_RAW_COOL_DAYS).')
param rawCoolAfterDays int = 30

@minValue(2)
@description('Days after it was written that a raw artifact is deleted; more than rawCoolAfterDays (azd: BENCH_RAW_DELETE_DAYS).')
param rawDeleteAfterDays int = 365

@minValue(60)
@description('Seconds a bot activity id or webhook signature is remembered (replay protection).')
param activityTtlSeconds int = 86400

@minValue(60)
@description('Seconds after its last write that a running item\'s live samples are deleted (the live view).')
param liveTtlSeconds int = 86400

@minValue(1)
@description('Days after its last heartbeat that an agent\'s registry record is deleted.')
param agentRecordTtlDays int = 30

@minValue(1)
@description('Days after a finished delivery (a Teams run thread whose result was posted) that its document is deleted.')
param finishedDeliveryTtlDays int = 7

@description('Email addresses the alerts go to (azd: BENCH_ALERT_EMAILS, comma-separated); empty: they fire in the portal only.')
param alertEmails string = ''

@minValue(120)
@description('Seconds without a complete tick after which a timer is stale (alert).')
param timerStaleSeconds int = 300

var token = toLower(uniqueString(subscription().id, resourceGroup().id, environmentName))
var tags = union(extraTags, { 'azd-env-name': environmentName, application: 'benchsvc' })
var pools = json(poolsJson)
var targets = json(targetsJson)
var elasticCapacities = json(elasticCapacitiesJson)
var deployWindowsPool = !empty(windowsPoolJson)
var windowsPool = deployWindowsPool ? json(windowsPoolJson) : { name: 'win', mounts: [] }
var linuxPoolNames = [for p in pools: p.name]
var allPools = deployWindowsPool ? concat(linuxPoolNames, [windowsPool.name]) : linuxPoolNames
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
var appHostName = 'func-bench-${token}.azurewebsites.net'
var apiUrlByName = 'https://${appHostName}'
// No client id given: the template creates the registration (modules/entra-app.bicep).
var createApiApp = empty(apiClientId)
var apiAppClientId = createApiApp ? entraApp.outputs.clientId : apiClientId
var apiIdentifierUri = createApiApp ? entraApp.outputs.identifierUri : 'api://${apiClientId}'
var apiScope = '${apiIdentifierUri}/.default'
var agentsSubnet = vnetEnabled ? network.outputs.agentsSubnetId : agentSubnetId
// Each SMB mount's secret, read by its own pool's identity only.
var smbSecrets = flatten(map(pools, p => map(filter(p.mounts, m => m.kind == 'smb'), m => { pool: p.name, secret: m.smb_secret_name })))

module identities 'modules/identities.bicep' = {
  name: 'identities'
  params: {
    location: location
    tags: tags
    token: token
    pools: allPools
  }
}

// First, with nothing to wait for: the role assignments wait for it and for Cosmos DB.
module roleDefinitions 'modules/roledefinitions.bicep' = {
  name: 'roledefinitions'
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: tags
    token: token
  }
}

module network 'modules/network.bicep' = if (vnetEnabled) {
  name: 'network'
  params: {
    location: location
    tags: tags
    token: token
    addressPrefix: vnetAddressPrefix
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    tags: tags
    token: token
    pools: allPools
    vnetEnabled: vnetEnabled
    workspaceId: monitoring.outputs.workspaceId
    rawCoolAfterDays: rawCoolAfterDays
    rawDeleteAfterDays: rawDeleteAfterDays
  }
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  params: {
    location: location
    tags: tags
    token: token
    appInsightsId: monitoring.outputs.appInsightsId
    alertEmails: filter(map(split(alertEmails, ','), e => trim(e)), e => !empty(e))
    timerStaleSeconds: timerStaleSeconds
  }
}

module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  params: {
    location: location
    tags: tags
    token: token
    databaseName: cosmosDatabaseName
    vnetEnabled: vnetEnabled
    workspaceId: monitoring.outputs.workspaceId
    continuousBackupTier: cosmosBackupTier
    activityTtlSeconds: activityTtlSeconds
    agentTtlSeconds: agentRecordTtlDays * 86400
    liveTtlSeconds: liveTtlSeconds
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
    workspaceId: monitoring.outputs.workspaceId
  }
}

module agentVault 'modules/keyvault.bicep' = {
  name: 'keyvault-agent'
  params: {
    location: location
    tags: tags
    name: 'kv-agt-${token}'
    publicNetworkAccess: vnetEnabled ? 'Disabled' : agentKeyVaultPublicNetworkAccess
    purgeProtection: keyVaultPurgeProtection
    workspaceId: monitoring.outputs.workspaceId
  }
}

module filesNfs 'modules/files-nfs.bicep' = if (vnetEnabled && nfsShareGiB > 0) {
  name: 'files-nfs'
  params: {
    location: location
    tags: tags
    token: token
    quotaGiB: nfsShareGiB
  }
}

// The API's app registration (Microsoft Graph Bicep extension) when none is given. After
// Cosmos DB, which takes minutes: the identities' service principals must have replicated
// before an app role is assigned to them (microsoftgraph/msgraph-bicep-types#193).
module entraApp 'modules/entra-app.bicep' = if (createApiApp) {
  name: 'entra-app'
  dependsOn: [
    cosmos
  ]
  params: {
    token: token
    appHostName: appHostName
    appIdentityPrincipalId: identities.outputs.appPrincipalId
    agentPrincipalIds: map(identities.outputs.agents, a => a.principalId)
    adminPrincipalId: deployerPrincipalId
  }
}

module entraPreauthorize 'modules/entra-preauthorize.bicep' = if (createApiApp) {
  name: 'entra-preauthorize'
  dependsOn: [
    entraApp
  ]
  params: {
    token: token
    appHostName: appHostName
    clientApplications: apiClientApplications
  }
}

module roles 'modules/roleassignments.bicep' = {
  name: 'roleassignments'
  // The app's scaling role is scoped to each elastic pool's scale set: it must exist. The
  // custom roles come from roleDefinitions, deployed first, and the Cosmos DB account
  // (an output used below) takes minutes: the definitions have replicated by then.
  dependsOn: [
    elasticAgentPools
  ]
  params: {
    elasticScaleSets: elasticScaleSets
    appPrincipalId: identities.outputs.appPrincipalId
    agentPrincipalIds: map(identities.outputs.agents, a => a.principalId)
    agentSecretGrants: [
      for s in smbSecrets: {
        principalId: identities.outputs.agents[indexOf(allPools, s.pool)].principalId
        secret: s.secret
      }
    ]
    queueAgentRoleName: roleDefinitions.outputs.queueAgentRoleName
    poolScalerRoleName: roleDefinitions.outputs.poolScalerRoleName
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
    agentPrincipalIds: map(identities.outputs.agents, a => a.principalId)
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
    activityTtlSeconds: activityTtlSeconds
    agentTtlSeconds: agentRecordTtlDays * 86400
    liveTtlSeconds: liveTtlSeconds
    deliveryTtlSeconds: finishedDeliveryTtlDays * 86400
    timerStaleSeconds: timerStaleSeconds
    rawCoolAfterDays: rawCoolAfterDays
    rawDeleteAfterDays: rawDeleteAfterDays
    apiClientId: apiAppClientId
    apiIdentifierUri: apiIdentifierUri
    // The API's own client (its sign-in), the agents' identities, then people's tools.
    allowedClientApplications: concat([apiAppClientId], map(identities.outputs.agents, a => a.clientId), apiClientApplications)
    virtualNetworkSubnetId: vnetEnabled ? network.outputs.appSubnetId : ''
  }
}

module privateEndpoints 'modules/private-endpoints.bicep' = if (vnetEnabled) {
  name: 'private-endpoints'
  params: {
    location: location
    tags: tags
    token: token
    vnetId: network.outputs.vnetId
    subnetId: network.outputs.endpointsSubnetId
    storageAccountId: storage.outputs.id
    cosmosAccountId: cosmos.outputs.id
    agentVaultId: agentVault.outputs.id
    functionAppId: functionApp.outputs.id
    nfsAccountId: nfsShareGiB > 0 ? filesNfs.outputs.id : ''
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
      privateEndpoints
    ]
    params: {
      location: location
      tags: tags
      token: token
      poolName: pool.name
      vmSize: pool.vmSize
      instanceCount: pool.instanceCount
      subnetId: agentsSubnet
      adminUsername: agentAdminUsername
      sshPublicKey: agentSshPublicKey
      agentIdentityId: identities.outputs.agents[indexOf(allPools, pool.name)].id
      agentIdentityClientId: identities.outputs.agents[indexOf(allPools, pool.name)].clientId
      apiUrl: functionApp.outputs.url
      queueUri: storage.outputs.queueEndpoint
      apiScope: apiScope
      appInsightsConnectionString: monitoring.outputs.connectionString
      agentPackageUrl: agentPackageUrl
      agentKeyVaultUri: agentVault.outputs.uri
      mounts: pool.mounts
      encryptionAtHost: agentEncryptionAtHost
    }
  }
]

// Elastic pools: the API sets their capacity (adapters/azure_scaler.py). Created with
// capacity 0; a redeploy keeps the capacity the API set (elasticCapacitiesJson).
module elasticAgentPools 'modules/agentpool-linux.bicep' = [
  for pool in elasticPools: {
    name: 'agentpool-${pool.name}'
    // No VM boots before the API grows the pool, so no role is needed yet.
    params: {
      location: location
      tags: tags
      token: token
      poolName: pool.name
      vmSize: pool.vmSize
      instanceCount: contains(elasticCapacities, 'vmss-${pool.name}-${token}') ? elasticCapacities['vmss-${pool.name}-${token}'] : 0
      subnetId: agentsSubnet
      adminUsername: agentAdminUsername
      sshPublicKey: agentSshPublicKey
      agentIdentityId: identities.outputs.agents[indexOf(allPools, pool.name)].id
      agentIdentityClientId: identities.outputs.agents[indexOf(allPools, pool.name)].clientId
      apiUrl: apiUrlByName
      queueUri: storage.outputs.queueEndpoint
      apiScope: apiScope
      appInsightsConnectionString: monitoring.outputs.connectionString
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
    privateEndpoints
  ]
  params: {
    location: location
    tags: tags
    token: token
    poolName: windowsPool.name
    vmSize: windowsPool.vmSize
    instanceCount: windowsPool.instanceCount
    subnetId: agentsSubnet
    adminUsername: agentAdminUsername
    adminPassword: windowsAdminPassword
    agentIdentityId: identities.outputs.agents[indexOf(allPools, windowsPool.name)].id
    agentIdentityClientId: identities.outputs.agents[indexOf(allPools, windowsPool.name)].clientId
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
// template: the registration the template made; manual: BENCH_API_CLIENT_ID's.
output API_REGISTRATION string = createApiApp ? 'template' : 'manual'
output API_CLIENT_ID string = apiAppClientId
output API_SCOPE string = apiScope
// scripts/preflight.py postprovision (manual path) gives each Bench.Agent and the app's
// identity its sign-in credential.
output AGENT_PRINCIPAL_IDS string = join(map(identities.outputs.agents, a => a.principalId), ',')
output APP_IDENTITY_CLIENT_ID string = identities.outputs.appClientId
output APP_IDENTITY_PRINCIPAL_ID string = identities.outputs.appPrincipalId
output QUEUE_URI string = storage.outputs.queueEndpoint
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output APP_KEY_VAULT_NAME string = appVault.outputs.name
output AGENT_KEY_VAULT_NAME string = agentVault.outputs.name
// What a pool mounts to benchmark the template's Azure Files NFS share (docs/deploy.md).
output NFS_SHARE_SOURCE string = vnetEnabled && nfsShareGiB > 0 ? filesNfs.outputs.source : ''
// The Teams app manifest's bot id (scripts/teams_manifest.py); empty without the bot.
output TEAMS_BOT_APP_ID string = deployTeamsBot ? identities.outputs.appClientId : ''
