// Key Vault with Azure RBAC (no access policies), soft delete and purge protection.
// The template creates no secrets: their values are set out of band (docs/deploy.md).

param location string
param tags object
param name string
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  // checkov:skip=CKV_AZURE_109: firewall follows the publicNetworkAccess parameter (Deny when Disabled); Key Vault references from a Flex app without VNet integration need the public endpoint
  // checkov:skip=CKV_AZURE_189: public access is a parameter (keyVaultPublicNetworkAccess), Enabled by default for the same reason; RBAC decides who reads
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
    enablePurgeProtection: true
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: publicNetworkAccess == 'Enabled' ? 'Allow' : 'Deny'
      bypass: 'AzureServices'
    }
  }
}

output name string = vault.name
output id string = vault.id
output uri string = vault.properties.vaultUri
