// vnetEnabled: the service's own virtual network, as Microsoft's Flex Consumption samples
// offer it. Three subnets: the Function App's VNet integration (delegated to
// Microsoft.App/environments, as Flex Consumption requires), private endpoints, and the
// agents. The agents reach their package index, Debian's mirrors and Entra ID through a NAT
// gateway: new subnets get no default outbound access (Microsoft Learn, "Default outbound
// access in Azure").

param location string
param tags object
param token string
param addressPrefix string = '10.40.0.0/16'

var appPrefix = cidrSubnet(addressPrefix, 24, 0)
var endpointsPrefix = cidrSubnet(addressPrefix, 24, 1)
var agentsPrefix = cidrSubnet(addressPrefix, 22, 1)

// Subnets take no inbound traffic from the internet; inside the VNet the defaults apply
// (agents reach the private endpoints, the app's integration subnet reaches them too).
resource nsg 'Microsoft.Network/networkSecurityGroups@2024-05-01' = [
  for name in ['app', 'endpoints', 'agents']: {
    name: 'nsg-bench-${name}-${token}'
    location: location
    tags: tags
    properties: {
      securityRules: [
        {
          name: 'deny-internet-inbound'
          properties: {
            priority: 4000
            direction: 'Inbound'
            access: 'Deny'
            protocol: '*'
            sourceAddressPrefix: 'Internet'
            sourcePortRange: '*'
            destinationAddressPrefix: '*'
            destinationPortRange: '*'
          }
        }
      ]
    }
  }
]

resource natIp 'Microsoft.Network/publicIPAddresses@2024-05-01' = {
  name: 'pip-bench-nat-${token}'
  location: location
  tags: tags
  sku: {
    name: 'Standard'
  }
  properties: {
    publicIPAllocationMethod: 'Static'
  }
}

resource nat 'Microsoft.Network/natGateways@2024-05-01' = {
  name: 'ng-bench-${token}'
  location: location
  tags: tags
  sku: {
    name: 'Standard'
  }
  properties: {
    publicIpAddresses: [
      {
        id: natIp.id
      }
    ]
    idleTimeoutInMinutes: 4
  }
}

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: 'vnet-bench-${token}'
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        addressPrefix
      ]
    }
    subnets: [
      {
        name: 'app'
        properties: {
          addressPrefix: appPrefix
          networkSecurityGroup: {
            id: nsg[0].id
          }
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
      {
        name: 'endpoints'
        properties: {
          addressPrefix: endpointsPrefix
          networkSecurityGroup: {
            id: nsg[1].id
          }
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
      {
        name: 'agents'
        properties: {
          addressPrefix: agentsPrefix
          networkSecurityGroup: {
            id: nsg[2].id
          }
          natGateway: {
            id: nat.id
          }
        }
      }
    ]
  }
}

output vnetId string = vnet.id
output appSubnetId string = '${vnet.id}/subnets/app'
output endpointsSubnetId string = '${vnet.id}/subnets/endpoints'
output agentsSubnetId string = '${vnet.id}/subnets/agents'
