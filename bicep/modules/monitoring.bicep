// Log Analytics + workspace-based Application Insights; ingestion by Entra ID only
// (the app sends with its identity: APPLICATIONINSIGHTS_AUTHENTICATION_STRING).

param location string
param tags object
param token string
param retentionInDays int = 30

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: 'log-bench-${token}'
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    features: {
      disableLocalAuth: true
    }
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: 'appi-bench-${token}'
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
    IngestionMode: 'LogAnalytics'
  }
}

output appInsightsName string = appInsights.name
output appInsightsId string = appInsights.id
// The connection string names the resource and its ingestion endpoint; with local auth
// disabled its instrumentation key alone cannot send telemetry.
output connectionString string = appInsights.properties.ConnectionString
output workspaceId string = workspace.id
