// Alert rules on the operator's metrics (functions/telemetry.py), which the app exports to
// Application Insights (customMetrics) through the Azure Monitor OpenTelemetry distro.
// docs/operations.md lists these and the other alerts worth setting.

param location string
param tags object
param token string
param appInsightsId string
@description('Where alerts go: email addresses; empty: the rules fire in the portal only.')
param alertEmails array = []
@description('A timer with no complete tick for this many seconds is stale (its runs stop advancing).')
param timerStaleSeconds int = 300

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmails)) {
  name: 'ag-bench-${token}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'bench'
    enabled: true
    emailReceivers: [
      for (email, i) in alertEmails: {
        name: 'email-${i}'
        emailAddress: email
        useCommonAlertSchema: true
      }
    ]
  }
}

var actions = empty(alertEmails) ? [] : [actionGroup.id]

// Each timer's last complete tick (the ticks container, read by every API instance), as its
// age; a timer that no instance reported at all in the window is stale too.
var timerQuery = '''
let ages = customMetrics
    | where name == "bench.timer.last_tick_age"
    | extend timer = tostring(customDimensions["timer"])
    | summarize age_s = min(valueMin) by timer;
datatable(timer: string)["runs", "schedules"]
| join kind=leftouter ages on timer
| extend age_s = coalesce(age_s, 1.0e9)
| where age_s > {0}
| project timer, age_s
'''

resource timerStale 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-bench-timer-stale-${token}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'bench: a timer is stale'
    description: 'No complete tick of the runs or schedules timer for ${timerStaleSeconds} s: runs stop advancing (deliveries, barriers, aggregation) or schedules stop firing. See docs/operations.md.'
    severity: 1
    enabled: true
    scopes: [
      appInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: format(timerQuery, timerStaleSeconds)
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actions
    }
  }
}

// Messages in a pool's poison queue: items that failed every delivery (their runs failed
// with the reason); the messages stay there until someone looks (docs/operations.md).
var poisonQuery = '''
customMetrics
| where name == "bench.queue.messages" and tostring(customDimensions["queue"]) == "poison"
| extend pool = tostring(customDimensions["pool"])
| summarize messages = max(valueMax) by pool
| where messages > 0
'''

resource poisonMessages 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-bench-poison-${token}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'bench: messages in a poison queue'
    description: 'A work item failed every delivery and went to its pool\'s poison queue (bench-<pool>-poison). See docs/operations.md.'
    severity: 2
    enabled: true
    scopes: [
      appInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: poisonQuery
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          dimensions: [
            {
              name: 'pool'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actions
    }
  }
}

output timerStaleId string = timerStale.id
output poisonMessagesId string = poisonMessages.id
