// The API's app registration, created by the template with the Microsoft Graph Bicep
// extension (bicepconfig.json) when no existing one is given (main.bicep apiClientId
// empty): the application with its scope and app roles (bicep/entra/api-app.json, the same
// file the manual path applies), its service principal with assignment required, the
// agents' Bench.Agent role, the deployer's Bench.Admin role, and the web sign-in of the
// Function App: a redirect URI, ID tokens, and a federated identity credential that lets the
// app's managed identity stand in for a client secret (Microsoft Learn, App Service,
// "Configure Microsoft Entra authentication", "Use a managed identity instead of a secret").
// The Azure CLI's pre-authorisation refers to the scope created here, so a second module
// (entra-preauthorize.bicep) applies it afterwards.
extension microsoftGraphV1

param token string
@description('Host name of the Function App: its sign-in redirect URI.')
param appHostName string
@description('Principal (object) id of the app\'s managed identity: the credential\'s subject.')
param appIdentityPrincipalId string
@description('Principal ids of the agents\' identities: each gets Bench.Agent.')
param agentPrincipalIds array
@description('Object id of the person deploying (azd: AZURE_PRINCIPAL_ID): gets Bench.Admin; empty: nobody.')
param adminPrincipalId string = ''

var manifest = loadJsonContent('../entra/api-app.json')
// api://<tenant id>/<name>: a secure app ID URI form that needs no appId, which a template
// cannot know before the application exists (Microsoft Learn, "Restrictions on identifier
// URIs of Microsoft Entra applications").
var identifierUri = 'api://${tenant().tenantId}/benchsvc-${token}'
var roleIds = toObject(manifest.appRoles, r => r.value, r => r.id)

resource api 'Microsoft.Graph/applications@v1.0' = {
  uniqueName: 'benchsvc-api-${token}'
  displayName: 'benchsvc-api ${token}'
  signInAudience: 'AzureADMyOrg'
  identifierUris: [
    identifierUri
  ]
  api: manifest.api
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

resource loginCredential 'Microsoft.Graph/applications/federatedIdentityCredentials@v1.0' = {
  name: '${api.uniqueName}/function-app-login'
  description: 'The Function App\'s managed identity as the client credential of App Service sign-in'
  issuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
  subject: appIdentityPrincipalId
  audiences: [
    'api://AzureADTokenExchange'
  ]
}

resource apiPrincipal 'Microsoft.Graph/servicePrincipals@v1.0' = {
  appId: api.appId
  // Only assigned users, groups and identities get a token (docs/deploy.md, "Who may call").
  appRoleAssignmentRequired: true
}

resource agentRoles 'Microsoft.Graph/appRoleAssignedTo@v1.0' = [
  for principalId in agentPrincipalIds: {
    appRoleId: roleIds['Bench.Agent']
    principalId: principalId
    resourceId: apiPrincipal.id
  }
]

resource adminRole 'Microsoft.Graph/appRoleAssignedTo@v1.0' = if (!empty(adminPrincipalId)) {
  appRoleId: roleIds['Bench.Admin']
  principalId: adminPrincipalId
  resourceId: apiPrincipal.id
}

output clientId string = api.appId
output identifierUri string = identifierUri
output uniqueName string = api.uniqueName
