// The API and timers: a Python 3.11 Function App on the Flex Consumption plan, running as
// its user-assigned identity. App settings hold endpoints and Key Vault references only.

param location string
param tags object
param token string
param appIdentityId string
param appIdentityClientId string
param agentPrincipalIds array
param storageAccountName string
param deploymentContainerUrl string
param queueEndpoint string
param blobEndpoint string
param cosmosEndpoint string
param cosmosDatabaseName string
param appInsightsConnectionString string
param keyVaultName string
@description('Names of the secrets already set in the app Key Vault; the others stay empty.')
param keyVaultSecrets array
@description('BENCH_POOLS entries: NAME[:key=value...] (core/fleet/pools.py).')
param pools array
param targets array
param gatePct string
param minMagnitudePct string
param webhookUrl string
param defaultRole string
param botRole string
@description('The Teams bot (bot.bicep) is deployed: its settings are the app identity\'s and tenant\'s.')
param teamsBot bool = false
@description('Client id of the Entra app registration that represents the API.')
param apiClientId string
@description('The registration\'s application ID URI (an audience of its tokens).')
param apiIdentifierUri string
@description('vnetEnabled: the subnet (delegated to Microsoft.App/environments) the app integrates with; empty: none.')
param virtualNetworkSubnetId string = ''
@description('Client ids whose tokens Easy Auth admits: the API\'s own (the web UI\'s sign-in), the agents\' identities, people\'s tools, pipelines.')
param allowedClientApplications array
@description('Retention (core/retention.py): the values Cosmos DB\'s TTLs and the lifecycle policy use.')
param activityTtlSeconds int
param agentTtlSeconds int
param liveTtlSeconds int
param deliveryTtlSeconds int
@description('Seconds without a complete tick after which /api/health calls a timer stale (the alert rule\'s too).')
param timerStaleSeconds int = 300
param rawCoolAfterDays int
param rawDeleteAfterDays int
param maximumInstanceCount int = 40
param instanceMemoryMB int = 2048
// HTTP calls one instance takes at once before Flex adds another. Python apps default to 1
// on every instance size (Microsoft Learn, "Concurrency in Azure Functions", HTTP trigger
// concurrency): then every held barrier call (up to 5 s, awaited without a thread) would
// take an instance of its own, and a step of 1,000 clients would queue behind the 40 cap.
@minValue(1)
@maxValue(1000)
param httpPerInstanceConcurrency int = 100

var appName = 'func-bench-${token}'

// A Key Vault reference for each secret the operator has set; empty otherwise, so an
// unresolved reference never reaches the code as a literal string.
var kvRefs = {
  teamsWebhookUrl: contains(keyVaultSecrets, 'teams-webhook-url') ? '@Microsoft.KeyVault(VaultName=${keyVaultName};SecretName=teams-webhook-url)' : ''
  webhookSecret: contains(keyVaultSecrets, 'webhook-secret') ? '@Microsoft.KeyVault(VaultName=${keyVaultName};SecretName=webhook-secret)' : ''
  teamsBotSecret: contains(keyVaultSecrets, 'teams-bot-secret') ? '@Microsoft.KeyVault(VaultName=${keyVaultName};SecretName=teams-bot-secret)' : ''
  botSecret: contains(keyVaultSecrets, 'bot-secret') ? '@Microsoft.KeyVault(VaultName=${keyVaultName};SecretName=bot-secret)' : ''
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  // checkov:skip=CKV_AZURE_225: zone redundancy on Flex Consumption exists in some regions only; a benchmark controller can wait out a zone outage (runs are retried from the queue)
  name: 'plan-bench-${token}'
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  // checkov:skip=CKV_AZURE_222: people and pipelines reach the API over its public endpoint (with vnetEnabled the agents use its private endpoint); App Service Authentication (below) rejects requests without an Entra ID token
  // checkov:skip=CKV_AZURE_17: callers authenticate with Entra ID tokens, not client certificates
  // checkov:skip=CKV_AZURE_212: Flex Consumption scales instances on demand; no fixed minimum to set
  // checkov:skip=CKV_AZURE_213: no App Service health-check eviction on Flex Consumption; /api/health is open to external probes instead
  name: appName
  location: location
  // azd finds the app to deploy to by this tag (azure.yaml service "api").
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${appIdentityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    // Outbound through the service's VNet (vnetEnabled): private endpoints of Storage,
    // Cosmos DB and the agents' vault (Microsoft's Flex Consumption samples, vnetEnabled).
    virtualNetworkSubnetId: empty(virtualNetworkSubnetId) ? null : virtualNetworkSubnetId
    httpsOnly: true
    clientCertEnabled: false
    keyVaultReferenceIdentity: appIdentityId
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: appIdentityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
        triggers: {
          http: {
            perInstanceConcurrency: httpPerInstanceConcurrency
          }
        }
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
    }
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
      appSettings: [
        // ---- platform: host storage and telemetry by identity
        { name: 'AzureWebJobsStorage__accountName', value: storageAccountName }
        { name: 'AzureWebJobsStorage__credential', value: 'managedidentity' }
        { name: 'AzureWebJobsStorage__clientId', value: appIdentityClientId }
        { name: 'APPLICATIONINSIGHTS_CONNECTION_STRING', value: appInsightsConnectionString }
        { name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING', value: 'Authorization=AAD;ClientId=${appIdentityClientId}' }
        // OpenTelemetry from the Python worker (host.json telemetryMode: OpenTelemetry): the
        // app's own spans and metrics through the Azure Monitor distro (adapters/telemetry.py)
        { name: 'PYTHON_ENABLE_OPENTELEMETRY', value: 'true' }
        // ---- platform: App Service sign-in (the web UI) with the app's identity as its
        // client credential, through the registration's federated identity credential:
        // no client secret (Microsoft Learn, "Use a managed identity instead of a secret").
        { name: 'OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID', value: appIdentityClientId }
        { name: 'WEBSITE_AUTH_AAD_ALLOWED_TENANTS', value: tenant().tenantId }
        // ---- the service's own settings: adapters/config.py SETTING_NAMES
        { name: 'BENCH_QUEUE_URI', value: queueEndpoint }
        { name: 'BENCH_BLOB_URI', value: blobEndpoint }
        { name: 'BENCH_COSMOS_ENDPOINT', value: cosmosEndpoint }
        { name: 'BENCH_COSMOS_DATABASE', value: cosmosDatabaseName }
        { name: 'BENCH_MAX_DELIVERIES', value: '5' }
        { name: 'BENCH_POOLS', value: join(pools, ',') }
        { name: 'BENCH_LOCAL_EMULATORS', value: '0' }
        { name: 'BENCH_LOCAL_TIMER_SECONDS', value: '0' }
        { name: 'BENCH_LOCAL_TIMER_LEASE_S', value: '0' } // Functions' timer triggers already run on one instance at a time
        { name: 'BENCH_TIMER_STALE_S', value: string(timerStaleSeconds) } // what the alert says too
        { name: 'AZURE_CLIENT_ID', value: appIdentityClientId }
        { name: 'BENCH_PUBLIC_URL', value: 'https://${appName}.azurewebsites.net' } // the default host name (no unique-hostname opt-in)
        { name: 'BENCH_GATE_PCT', value: gatePct }
        { name: 'BENCH_MIN_MAGNITUDE_PCT', value: minMagnitudePct }
        { name: 'BENCH_TEAMS_WEBHOOK_URL', value: kvRefs.teamsWebhookUrl }
        { name: 'BENCH_WEBHOOK_URL', value: webhookUrl }
        { name: 'BENCH_WEBHOOK_SECRET', value: kvRefs.webhookSecret }
        { name: 'BENCH_API_KEYS', value: '' }
        { name: 'BENCH_TRUST_EASYAUTH', value: '1' }
        { name: 'BENCH_AGENT_PRINCIPALS', value: join(agentPrincipalIds, ',') }
        { name: 'BENCH_DEFAULT_ROLE', value: defaultRole }
        { name: 'BENCH_TEAMS_BOT_SECRET', value: kvRefs.teamsBotSecret }
        { name: 'BENCH_BOT_SECRET', value: kvRefs.botSecret }
        { name: 'BENCH_BOT_ROLE', value: botRole }
        // ---- the Teams bot: the app's identity is the bot's; roles from the API's registration
        { name: 'BENCH_BOT_APP_ID', value: teamsBot ? appIdentityClientId : '' }
        { name: 'BENCH_BOT_TENANT_ID', value: teamsBot ? tenant().tenantId : '' }
        { name: 'BENCH_BOT_ISSUERS', value: '' } // Bot Framework's and the tenant's (adapters/bot_auth.py)
        { name: 'BENCH_API_APP_ID', value: apiClientId }
        { name: 'BENCH_GRAPH_URL', value: '' } // Microsoft Graph's global endpoint
        { name: 'BENCH_TARGETS', value: string(targets) }
        // ---- elastic pools: their scale sets, in this subscription and resource group
        { name: 'BENCH_LOCAL_SCALER_DIR', value: '' }
        { name: 'BENCH_AZURE_SUBSCRIPTION_ID', value: subscription().subscriptionId }
        { name: 'BENCH_AZURE_RESOURCE_GROUP', value: resourceGroup().name }
        // ---- retention: enforced by Cosmos DB's TTL and Blob lifecycle management here
        { name: 'BENCH_ACTIVITY_TTL_S', value: string(activityTtlSeconds) }
        { name: 'BENCH_AGENT_TTL_S', value: string(agentTtlSeconds) }
        { name: 'BENCH_LIVE_TTL_S', value: string(liveTtlSeconds) }
        { name: 'BENCH_DELIVERY_TTL_S', value: string(deliveryTtlSeconds) }
        { name: 'BENCH_RAW_COOL_DAYS', value: string(rawCoolAfterDays) }
        { name: 'BENCH_RAW_DELETE_DAYS', value: string(rawDeleteAfterDays) }
      ]
    }
  }
}

// App Service Authentication (Easy Auth): Entra ID tokens for the API registration.
// The bot routes verify their own HMAC signatures or channel tokens, and health must answer
// probes.
// Without defaultAuthorizationPolicy Easy Auth lets in any token the tenant issues for the API;
// with allowedApplications only tokens obtained through those clients (their appid/azp claim)
// pass, others get 403 (Microsoft Learn, App Service: Configure Microsoft Entra
// authentication, Use a built-in authorization policy). Who may get a token at all is the app
// registration's business: assignment required and app roles (docs/deploy.md). The app
// itself answers 403 to a caller with no Bench.* role (BENCH_DEFAULT_ROLE=none).
resource auth 'Microsoft.Web/sites/config@2024-04-01' = {
  // The checks below read web-config or v1 authsettings properties; this is authsettingsV2.
  // checkov:skip=CKV_AZURE_13: false positive: authentication is on (platform.enabled, requireAuthentication); the check reads the v1 authsettings schema
  // checkov:skip=CKV_AZURE_63: false positive: HTTP logging is a web-config property, not an authsettingsV2 one
  // checkov:skip=CKV_AZURE_65: false positive: detailed errors are a web-config property
  // checkov:skip=CKV_AZURE_66: false positive: failed request tracing is a web-config property
  // checkov:skip=CKV_AZURE_80: false positive: .NET version is a web-config property; the app is Python
  // checkov:skip=CKV_AZURE_88: false positive: Azure Files mounts are a web-config property; the app needs none
  // checkov:skip=CKV_AZURE_222: false positive: public network access is a site property (justified on the site)
  parent: app
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
      runtimeVersion: '~1'
    }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'Return401'
      excludedPaths: [
        '/api/bot/teams'
        '/api/bot/webhook'
        '/api/health'
        '/api/messages' // the Teams bot: Bot Framework's token, checked by the app
      ]
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: apiClientId
          // The sign-in flow's client credential: the app setting names the managed
          // identity whose token Entra ID accepts in place of a secret.
          clientSecretSettingName: 'OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID'
          openIdIssuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
        }
        validation: {
          allowedAudiences: [
            apiClientId
            apiIdentifierUri
          ]
          // Only tokens obtained through these clients pass (see above).
          defaultAuthorizationPolicy: {
            allowedApplications: allowedClientApplications
          }
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
    }
    httpSettings: {
      requireHttps: true
    }
  }
}

// Publishing by Entra ID only (azd / func publish), never by basic-auth credentials.
resource ftpCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: app
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: app
  name: 'scm'
  properties: {
    allow: false
  }
}

output name string = app.name
output defaultHostName string = app.properties.defaultHostName
output url string = 'https://${app.properties.defaultHostName}'
output id string = app.id
