// Key Vault with Azure RBAC (no access policies), soft delete and, by choice, purge protection.
// The template creates no secrets: their values are set out of band (docs/deploy.md).

param location string
param tags object
param name string
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string
@description('Purge protection (see main.bicep keyVaultPurgeProtection).')
param purgeProtection bool
@description('Log Analytics workspace for the audit log.')
param workspaceId string

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  // checkov:skip=CKV_AZURE_109: firewall follows the publicNetworkAccess parameter (Deny when Disabled); the app vault must stay public because Flex Consumption cannot resolve Key Vault references from a network-restricted vault
  // checkov:skip=CKV_AZURE_189: public access is Enabled for the app vault for that reason and a parameter for the agent vault (Disabled with vnetEnabled: private endpoint only); RBAC decides who reads
  // checkov:skip=CKV_AZURE_110: purge protection is the keyVaultPurgeProtection parameter, true by default; false is for throw-away environments that azd down --purge must free at once
  // checkov:skip=CKV_AZURE_42: soft delete is always on (90 days); purge protection is the keyVaultPurgeProtection parameter, true by default
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    // Key Vault accepts true or null here, never false (Microsoft.KeyVault/vaults reference:
    // "enabling this functionality is irreversible - the property does not accept false").
    enablePurgeProtection: purgeProtection ? true : null
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: publicNetworkAccess == 'Enabled' ? 'Allow' : 'Deny'
      bypass: 'AzureServices'
    }
  }
}

// Every access to a secret, by whom (AuditEvent).
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: vault
  properties: {
    workspaceId: workspaceId
    logs: [
      {
        category: 'AuditEvent'
        enabled: true
      }
    ]
  }
}

output name string = vault.name
output id string = vault.id
output uri string = vault.properties.vaultUri
