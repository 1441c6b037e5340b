// The two custom roles, in a module of their own that main.bicep deploys first and that the
// role assignments wait for (with the Cosmos DB account, which takes minutes): a role
// definition replicates with a delay, and an assignment made in the same breath can fail
// with RoleDefinitionDoesNotExist on the first `azd up` (Microsoft Learn, "Troubleshoot
// Azure RBAC": "role definition ... may not have replicated").

// The agents' queue role: receive, renew visibility (update), delete. The built-in
// Message Processor cannot update a message, Queue Data Contributor can also create and
// delete queues. Assignable in this resource group only, assigned per queue.
resource queueAgentRole 'Microsoft.Authorization/roleDefinitions@2022-04-01' = {
  name: guid(resourceGroup().id, 'benchsvc-queue-agent')
  properties: {
    // Role names are unique per tenant: one role per resource group.
    roleName: 'Bench queue agent ${uniqueString(resourceGroup().id)} (${resourceGroup().name})'
    description: 'Receive, renew and delete messages on a benchsvc work queue.'
    type: 'CustomRole'
    permissions: [
      {
        actions: []
        notActions: []
        dataActions: [
          'Microsoft.Storage/storageAccounts/queueServices/queues/messages/read'
          'Microsoft.Storage/storageAccounts/queueServices/queues/messages/write'
          'Microsoft.Storage/storageAccounts/queueServices/queues/messages/delete'
          'Microsoft.Storage/storageAccounts/queueServices/queues/messages/process/action'
        ]
        notDataActions: []
      }
    ]
    assignableScopes: [
      resourceGroup().id
    ]
  }
}

// The app's scaling role: read a scale set and write it (a PATCH of sku.capacity is a
// write; ARM has no narrower action for it). No built-in role is this small (Virtual
// Machine Contributor also covers VMs, disks, run commands...). Assigned per elastic
// pool's scale set, so it reaches no other resource.
resource poolScalerRole 'Microsoft.Authorization/roleDefinitions@2022-04-01' = {
  name: guid(resourceGroup().id, 'benchsvc-pool-scaler')
  properties: {
    roleName: 'Bench pool scaler ${uniqueString(resourceGroup().id)} (${resourceGroup().name})'
    description: 'Read an agent scale set and set its capacity.'
    type: 'CustomRole'
    permissions: [
      {
        actions: [
          'Microsoft.Compute/virtualMachineScaleSets/read'
          'Microsoft.Compute/virtualMachineScaleSets/write'
        ]
        notActions: []
        dataActions: []
        notDataActions: []
      }
    ]
    assignableScopes: [
      resourceGroup().id
    ]
  }
}

output queueAgentRoleName string = queueAgentRole.name
output poolScalerRoleName string = poolScalerRole.name
