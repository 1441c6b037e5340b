// One Linux agent pool: a VM scale set of Debian 12 clients that mount the volumes under
// /mnt/bench/<alias> (systemd mount units) and run the agent (benchagent) as a systemd
// service. cloud-init does the set-up; this file only fills the template's @@...@@
// placeholders.

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
@description('Where the agents send their traces (Entra ID ingestion with the pool\'s identity); empty: nowhere.')
param appInsightsConnectionString string = ''
@description('URL of the benchsvc wheel or sdist that pip installs into /opt/benchsvc.')
param agentPackageUrl string
@description('Vault holding SMB share credentials, read at every boot with the agent identity.')
param agentKeyVaultUri string
@description('[{alias, kind: nfs|smb, source, nfs_version, nconnect, rsize, wsize, smb_secret_name}]')
param mounts array
@description('Encryption at host (needs the EncryptionAtHost feature on the subscription).')
param encryptionAtHost bool = true

// Mount options. nofail is gone: a volume that does not mount must stop the agent (its unit
// requires the mount units), never leave it measuring the VM's own disk.
var nfsOptions = 'hard,proto=tcp,noatime,_netdev'
var smbOptions = 'vers=3.1.1,serverino,nosharesock,actimeo=30,mfsymlinks,_netdev'

// Keys a mount may leave out (nfs_* for SMB shares, smb_secret_name for NFS volumes).
var mountDefaults = {
  nfs_version: '3'
  nconnect: 8
  rsize: 262144
  wsize: 262144
  smb_secret_name: ''
}
// An Azure Files NFS share (<account>.file.core.<cloud suffix>:/<account>/<share>) speaks NFS
// 4.1 only; Microsoft mounts it with nconnect=4 ("Improve NFS Azure file share performance":
// the benefit levels off beyond 4) and sec=sys, rsize/wsize 1 MiB (the largest it takes).
var azureFilesDefaults = {
  nfs_version: '4.1'
  nconnect: 4
  rsize: 1048576
  wsize: 1048576
  smb_secret_name: ''
}
// An NFS source is host:/path; an SMB one //host/share.
var onAzureFiles = [for m in mounts: contains(m.source, '.file.core.') && contains(m.source, ':/')]
var fullMounts = [for (m, i) in mounts: union(onAzureFiles[i] ? azureFilesDefaults : mountDefaults, m)]

// Per mount, by kind: the type systemd mounts with, the type /proc/self/mountinfo then shows
// (what the agent checks: NFSv3 is nfs, NFSv4.x nfs4, SMB cifs) and the options. An unknown
// kind or NFS version fails the deployment here.
var fsTypes = {
  nfs: 'nfs'
  smb: 'cifs'
}
var nfsMountinfoTypes = {
  v3: 'nfs'
  v4: 'nfs4'
  v4_0: 'nfs4'
  v4_1: 'nfs4'
  v4_2: 'nfs4'
}
var givenVersionKeys = [for m in fullMounts: replace(m.nfs_version, '.', '_')]
// Any other version on an Azure Files share fails the deployment here (no such key).
var azureFilesVersionKeys = {
  v4_1: '4_1'
}
var nfsVersionKeys = [for (k, i) in givenVersionKeys: onAzureFiles[i] ? azureFilesVersionKeys['v${k}'] : k]
var mountinfoTypes = [
  for (m, i) in fullMounts: {
    nfs: nfsMountinfoTypes['v${nfsVersionKeys[i]}']
    smb: 'cifs'
  }
]
var credentialFiles = [for m in fullMounts: '/etc/benchsvc/smb-${m.alias}.cred']
var nfsSecurity = [for (m, i) in fullMounts: onAzureFiles[i] ? 'sec=sys,' : '']
var mountOptions = [
  for (m, i) in fullMounts: {
    nfs: 'vers=${m.nfs_version},${nfsSecurity[i]}nconnect=${m.nconnect},rsize=${m.rsize},wsize=${m.wsize},${nfsOptions}'
    smb: 'credentials=${credentialFiles[i]},${smbOptions}'
  }
]
var mountDirs = [for m in fullMounts: '/mnt/bench/${m.alias}']

// One systemd mount unit per volume (systemd.mount(5)). Its file name must be the escaped
// mount path (systemd-escape --path --suffix=mount): aliases match ^[a-z][a-z0-9-]*$, so only
// "-" needs escaping, as \x2d. SMB units first fetch their credentials (every boot).
var escapedAliases = [for m in fullMounts: replace(m.alias, '-', '\\x2d')]
var unitNames = [for (m, i) in fullMounts: 'mnt-bench-${escapedAliases[i]}.mount']
var unitDependencies = {
  nfs: []
  smb: [
    'Requires=benchsvc-smb-credentials.service'
    'After=benchsvc-smb-credentials.service'
  ]
}
var unitHeads = [
  for m in fullMounts: [
    '[Unit]'
    'Description=Benchmark volume ${m.alias} (${m.kind})'
    'Wants=network-online.target'
    'After=network-online.target'
  ]
]
var unitMounts = [
  for (m, i) in fullMounts: [
    ''
    '[Mount]'
    'What=${m.source}'
    'Where=${mountDirs[i]}'
    'Type=${fsTypes[m.kind]}'
    'Options=${mountOptions[i][m.kind]}'
    'TimeoutSec=120'
    ''
  ]
]
var mountUnits = [
  for (m, i) in fullMounts: {
    path: '/etc/systemd/system/${unitNames[i]}'
    permissions: '0644'
    content: join(concat(unitHeads[i], unitDependencies[m.kind], unitMounts[i]), '\n')
  }
]
// Each unit as one write_files item (a JSON flow mapping) on a line of its own.
var mountUnitItems = [for u in mountUnits: format('  - {0}', string(u))]

// alias -> {path, fstype, source} as a JSON object (aliases need no escaping): the agent
// refuses to measure unless /proc/self/mountinfo shows that path mounted so.
var agentMounts = [
  for (m, i) in fullMounts: {
    path: mountDirs[i]
    fstype: mountinfoTypes[i][m.kind]
    source: m.source
  }
]
var agentMountsJson = [for a in agentMounts: string(a)]
var mountPairs = [for (m, i) in fullMounts: '"${m.alias}":${agentMountsJson[i]}']
var mountSecrets = [
  for (m, i) in fullMounts: {
    alias: m.alias
    kind: m.kind
    secret: m.smb_secret_name
    credentials: credentialFiles[i]
  }
]

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
  appinsights_connection_string: appInsightsConnectionString
}
var smbConfig = {
  vault_uri: agentKeyVaultUri
  client_id: agentIdentityClientId
  mounts: mountSecrets
}

// Placeholders: agent config, SMB config, mount units, package URL, the agent's mounts.
var cloudInit = replace(replace(replace(replace(replace(loadTextContent('../cloud-init/linux-agent.yaml'), '@@AGENT_CONFIG_JSON@@', string(agentConfig)), '@@SMB_CONFIG_JSON@@', string(smbConfig)), '@@MOUNT_UNIT_FILES@@', join(mountUnitItems, '\n')), '@@AGENT_PACKAGE_URL@@', agentPackageUrl), '@@MOUNT_PATHS@@', join(mountDirs, ' '))

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
