# Windows agent bootstrap, run by the CustomScriptExtension of
# bicep/modules/agentpool-windows.bicep from C:\AzureData\CustomData.bin. The template only
# replaces the @@...@@ placeholders. It installs the prerequisites that
# agent/windows/install-agent.ps1 checks for (Python 3.11 with the py launcher, DiskSpd) from
# the files the extension downloaded into the current folder, then runs that script with the
# pool's settings and DiskSpd's absolute path. No service wrapper is downloaded: python.exe is
# the service binary (agent/winservice.py).
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest
$downloads = (Get-Location).Path
$config = @'
@@CONFIG_JSON@@
'@ | ConvertFrom-Json

function Find-Download([string] $pattern) {
    $file = Get-ChildItem -Path $downloads -Filter $pattern | Select-Object -First 1
    if (-not $file) { throw "The extension did not download $pattern into $downloads." }
    return $file.FullName
}

if (-not (Get-Command py.exe -ErrorAction SilentlyContinue)) {
    $python = Start-Process -FilePath (Find-Download 'python-3.11*.exe') -Wait -PassThru -ArgumentList @(
        '/quiet', 'InstallAllUsers=1', 'PrependPath=1', 'Include_launcher=1',
        'InstallLauncherAllUsers=1', 'Include_test=0')
    if ($python.ExitCode -ne 0) { throw "The Python installer failed (exit code $($python.ExitCode))." }
}

$bin = Join-Path $env:ProgramFiles 'benchsvc\bin'
$work = Join-Path $env:TEMP 'benchsvc-bootstrap'
New-Item -ItemType Directory -Force -Path $bin, $work | Out-Null
Expand-Archive -Force -Path (Find-Download 'diskspd*.zip') -DestinationPath (Join-Path $work 'diskspd')
$diskspd = Get-ChildItem -Recurse -Path (Join-Path $work 'diskspd') -Filter diskspd.exe |
    Where-Object { $_.DirectoryName -like '*amd64*' } | Select-Object -First 1
if (-not $diskspd) { throw 'DiskSpd.zip has no amd64\diskspd.exe.' }
Copy-Item -Force -Path $diskspd.FullName -Destination $bin

# The repository's installer, embedded by the template (base64 of its exact bytes).
$installer = Join-Path $work 'install-agent.ps1'
[IO.File]::WriteAllBytes($installer, [Convert]::FromBase64String('@@INSTALL_AGENT_PS1_B64@@'))

$mounts = @{}
foreach ($m in $config.mounts) { $mounts[$m.alias] = $m.path }
& $installer -ApiUrl $config.api_url -QueueUri $config.queue_uri -Pool $config.pool `
    -Mounts $mounts -WheelPath (Find-Download '*.whl') `
    -ManagedIdentityClientId $config.managed_identity_client_id -ApiScope $config.api_scope `
    -DiskSpdPath (Join-Path $bin 'diskspd.exe')
