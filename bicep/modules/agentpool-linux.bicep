// One Linux agent pool: a VM scale set of Debian 12 clients that mount the volumes under
// /mnt/bench/<alias> and run the agent (benchagent) as a systemd service. cloud-init does
// the set-up; this file only fills the template's @@...@@ placeholders.

param location string
param tags object
param token string
@description('Pool name: the agents poll queue bench-<pool>.')
param poolName string
param vmSize string
param instanceCount int
param subnetId string
param adminUsername string
@description('SSH public key (OpenSSH format) for adminUsername; password login is off.')
param sshPublicKey string
param agentIdentityId string
param agentIdentityClientId string
param apiUrl string
param queueUri string
@description('Entra ID scope the agent asks a token for: api://<apiClientId>/.default.')
param apiScope string
@description('URL of the benchsvc wheel or sdist that pip installs into /opt/benchsvc.')
param agentPackageUrl string
@description('Vault holding SMB share credentials, read at boot with the agent identity.')
param agentKeyVaultUri string
@description('[{alias, kind: nfs|smb, source, nfs_version, nconnect, rsize, wsize, smb_secret_name}]')
param mounts array
@description('Encryption at host (needs the EncryptionAtHost feature on the subscription).')
param encryptionAtHost bool = true

var nfsOptions = 'hard,proto=tcp,noatime,_netdev,nofail'
var smbOptions = 'vers=3.1.1,serverino,nosharesock,actimeo=30,mfsymlinks,_netdev,nofail'

// Keys a mount may leave out (nfs_* for SMB shares, smb_secret_name for NFS volumes).
var mountDefaults = {
  nfs_version: '3'
  nconnect: 8
  rsize: 262144
  wsize: 262144
  smb_secret_name: ''
}
var fullMounts = [for m in mounts: union(mountDefaults, m)]

// Per mount, its fstab type and options by kind; an unknown kind fails the deployment.
var fsTypes = {
  nfs: 'nfs'
  smb: 'cifs'
}
var mountOptions = [
  for m in fullMounts: {
    nfs: 'vers=${m.nfs_version},nconnect=${m.nconnect},rsize=${m.rsize},wsize=${m.wsize},${nfsOptions}'
    smb: 'credentials=/etc/benchsvc/smb-${m.alias}.cred,${smbOptions}'
  }
]
// cloud-init fstab entries; tests/test_bicep.py evaluates these expressions.
var mountEntries = [
  for (m, i) in fullMounts: [
    m.source
    '/mnt/bench/${m.alias}'
    fsTypes[m.kind]
    mountOptions[i][m.kind]
    '0'
    '0'
  ]
]
var mountDirs = [for m in fullMounts: '/mnt/bench/${m.alias}']
// alias -> mount path as a JSON object (aliases match ^[a-z][a-z0-9-]*$: nothing to escape).
var mountPairs = [for m in fullMounts: '"${m.alias}":"/mnt/bench/${m.alias}"']
var mountSecrets = [for m in fullMounts: { alias: m.alias, kind: m.kind, secret: m.smb_secret_name }]

var mountsJson = join(mountPairs, ',')

// Exactly the fields of agent/config.py AgentConfig.
var agentConfig = {
  api_url: apiUrl
  queue_uri: queueUri
  pool: poolName
  mounts: json('{${mountsJson}}')
  api_scope: apiScope
  managed_identity_client_id: agentIdentityClientId
  imds: true
  work_dir: '/var/lib/benchsvc/work'
}
var smbConfig = {
  vault_uri: agentKeyVaultUri
  client_id: agentIdentityClientId
  mounts: mountSecrets
}

// Placeholders: agent config, SMB config, fstab entries, mount points, package URL, unit mounts.
var cloudInit = replace(replace(replace(replace(replace(replace(loadTextContent('../cloud-init/linux-agent.yaml'), '@@AGENT_CONFIG_JSON@@', string(agentConfig)), '@@SMB_CONFIG_JSON@@', string(smbConfig)), '@@MOUNTS_JSON@@', string(mountEntries)), '@@MKDIR_JSON@@', string(concat(['mkdir', '-p', '/mnt/bench'], mountDirs))), '@@AGENT_PACKAGE_URL@@', agentPackageUrl), '@@MOUNT_PATHS@@', join(mountDirs, ' '))

resource vmss 'Microsoft.Compute/virtualMachineScaleSets@2024-07-01' = {
  // checkov:skip=CKV_AZURE_95: automatic OS image upgrades reimage instances at any time, which would kill benchmarks mid-measurement; redeploy (image version latest) between campaigns instead
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
        computerNamePrefix: take('${poolName}-', 15)
        adminUsername: adminUsername
        customData: base64(cloudInit)
        linuxConfiguration: {
          disablePasswordAuthentication: true
          provisionVMAgent: true
          ssh: {
            publicKeys: [
              {
                path: '/home/${adminUsername}/.ssh/authorized_keys'
                keyData: sshPublicKey
              }
            ]
          }
        }
      }
      storageProfile: {
        imageReference: {
          publisher: 'Debian'
          offer: 'debian-12'
          sku: '12-gen2'
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
    }
  }
}

output name string = vmss.name
