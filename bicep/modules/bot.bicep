// The Teams bot's Azure Bot: single-tenant, its identity the Function App's user-assigned
// managed identity (no app secret anywhere), its messaging endpoint the app's /api/messages,
// the Microsoft Teams channel on. The app validates the channel's tokens itself
// (functions/messages.py); App Service Authentication leaves /api/messages to it.

param tags object
param token string
@description('Resource id of the Function App\'s user-assigned identity (the bot\'s identity).')
param appIdentityId string
@description('Its client id: the bot\'s Microsoft App ID.')
param appIdentityClientId string
@description('The API\'s address: the bot\'s messaging endpoint is <apiUrl>/api/messages.')
param apiUrl string
@description('Name people see in Teams.')
param displayName string = 'Storage benchmarks'
@allowed([
  'F0'
  'S1'
])
@description('F0: free, standard channels (Teams is one) are not metered.')
param sku string = 'F0'

resource bot 'Microsoft.BotService/botServices@2022-09-15' = {
  name: 'bot-bench-${token}'
  location: 'global' // an Azure Bot is a global resource
  tags: tags
  kind: 'azurebot'
  sku: {
    name: sku
  }
  properties: {
    displayName: displayName
    endpoint: '${apiUrl}/api/messages'
    msaAppType: 'UserAssignedMSI'
    msaAppId: appIdentityClientId
    msaAppTenantId: tenant().tenantId
    msaAppMSIResourceId: appIdentityId
    // Only Entra ID (the managed identity) talks to the channels: no Direct Line secrets.
    disableLocalAuth: true
    isStreamingSupported: false
  }
}

resource teams 'Microsoft.BotService/botServices/channels@2022-09-15' = {
  parent: bot
  name: 'MsTeamsChannel'
  location: 'global'
  tags: tags
  properties: {
    channelName: 'MsTeamsChannel'
    properties: {
      isEnabled: true
      enableCalling: false
    }
  }
}

output name string = bot.name
output appId string = appIdentityClientId
