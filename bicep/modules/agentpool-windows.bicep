// Optional Windows agent pool (DiskSpd): a Windows Server 2022 scale set whose
// CustomScriptExtension runs bicep/windows/bootstrap-agent.ps1 (passed as custom data),
// which installs the prerequisites and runs agent/windows/install-agent.ps1.

param location string
param tags object
param token string
param poolName string
param vmSize string
param instanceCount int
param subnetId string
param adminUsername string
@secure()
@minLength(12)
@description('Local administrator password (Windows has no SSH-key-only login); the deployment stops here, before any VM, when it is missing (main.bicep windowsAdminPassword).')
param adminPassword string
param agentIdentityId string
param agentIdentityClientId string
param apiUrl string
param queueUri string
param apiScope string
@description('URL of the benchsvc wheel (.whl); install-agent.ps1 installs wheels only.')
param agentPackageUrl string
@description('[{alias, path}]: drive directories (F:\\bench) or UNC shares.')
param mounts array
param pythonInstallerUrl string = 'https://www.python.org/ftp/python/3.11.9/python-3.11.9-amd64.exe'
param diskSpdZipUrl string = 'https://github.com/microsoft/diskspd/releases/download/v2.2/DiskSpd.ZIP'
param encryptionAtHost bool = true

var bootstrapConfig = {
  api_url: apiUrl
  queue_uri: queueUri
  pool: poolName
  mounts: mounts
  api_scope: apiScope
  managed_identity_client_id: agentIdentityClientId
}
var bootstrap = replace(replace(loadTextContent('../windows/bootstrap-agent.ps1'), '@@CONFIG_JSON@@', string(bootstrapConfig)), '@@INSTALL_AGENT_PS1_B64@@', base64(loadTextContent('../../agent/windows/install-agent.ps1')))

resource vmss 'Microsoft.Compute/virtualMachineScaleSets@2024-07-01' = {
  // checkov:skip=CKV_AZURE_95: automatic OS image upgrades reimage instances at any time, which would kill benchmarks mid-measurement; redeploy (image version latest) between campaigns instead
  // checkov:skip=CKV_AZURE_178: false positive: a Linux SSH check on a Windows scale set
  name: 'vmss-${poolName}-${token}'
  location: location
  tags: union(tags, { 'bench-pool': poolName })
  sku: {
    name: vmSize
    tier: 'Standard'
    capacity: instanceCount
  }
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${agentIdentityId}': {}
    }
  }
  properties: {
    orchestrationMode: 'Uniform'
    overprovision: false
    upgradePolicy: {
      mode: 'Manual'
    }
    virtualMachineProfile: {
      osProfile: {
        computerNamePrefix: take(poolName, 9)
        adminUsername: adminUsername
        adminPassword: adminPassword
        // Windows saves this as C:\AzureData\CustomData.bin; the extension runs it.
        customData: base64(bootstrap)
        windowsConfiguration: {
          provisionVMAgent: true
          enableAutomaticUpdates: true
        }
      }
      storageProfile: {
        imageReference: {
          publisher: 'MicrosoftWindowsServer'
          offer: 'WindowsServer'
          sku: '2022-datacenter-azure-edition'
          version: 'latest'
        }
        osDisk: {
          createOption: 'FromImage'
          caching: 'ReadWrite'
          managedDisk: {
            storageAccountType: 'Premium_LRS'
          }
        }
      }
      securityProfile: {
        encryptionAtHost: encryptionAtHost
      }
      networkProfile: {
        networkInterfaceConfigurations: [
          {
            name: 'nic'
            properties: {
              primary: true
              enableAcceleratedNetworking: true
              ipConfigurations: [
                {
                  name: 'ipconfig'
                  properties: {
                    subnet: {
                      id: subnetId
                    }
                  }
                }
              ]
            }
          }
        ]
      }
      diagnosticsProfile: {
        bootDiagnostics: {
          enabled: true
        }
      }
      extensionProfile: {
        extensions: [
          {
            name: 'install-agent'
            properties: {
              publisher: 'Microsoft.Compute'
              type: 'CustomScriptExtension'
              typeHandlerVersion: '1.10'
              autoUpgradeMinorVersion: true
              settings: {
                fileUris: [
                  pythonInstallerUrl
                  diskSpdZipUrl
                  agentPackageUrl
                ]
                commandToExecute: 'powershell.exe -NoProfile -ExecutionPolicy Bypass -Command "Copy-Item -Force C:/AzureData/CustomData.bin C:/AzureData/bootstrap-agent.ps1; & C:/AzureData/bootstrap-agent.ps1"'
              }
            }
          }
        ]
      }
    }
  }
}

output name string = vmss.name
