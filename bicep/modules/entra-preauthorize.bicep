// The API's app registration again (entra-app.bicep), now with its pre-authorized clients:
// they refer to the scope, which must exist first (the manual path's second PATCH,
// bicep/entra/api-preauthorize.json). Graph Bicep resources are desired state, matched by
// uniqueName: this declaration repeats every property of the first.
extension microsoftGraphV1

param token string
param appHostName string
@description('Client ids of the tools people sign in with, pre-authorized for the scope (no consent prompt, no AADSTS65001).')
param clientApplications array

var manifest = loadJsonContent('../entra/api-app.json')
var identifierUri = 'api://${tenant().tenantId}/benchsvc-${token}'
var scopeId = manifest.api.oauth2PermissionScopes[0].id

resource api 'Microsoft.Graph/applications@v1.0' = {
  uniqueName: 'benchsvc-api-${token}'
  displayName: 'benchsvc-api ${token}'
  signInAudience: 'AzureADMyOrg'
  identifierUris: [
    identifierUri
  ]
  api: union(manifest.api, {
    preAuthorizedApplications: [
      for appId in clientApplications: {
        appId: appId
        delegatedPermissionIds: [
          scopeId
        ]
      }
    ]
  })
  appRoles: manifest.appRoles
  web: {
    redirectUris: [
      'https://${appHostName}/.auth/login/aad/callback'
    ]
    implicitGrantSettings: {
      enableIdTokenIssuance: true
    }
  }
}
