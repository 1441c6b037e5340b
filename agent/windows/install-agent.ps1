#Requires -Version 5.1
#Requires -RunAsAdministrator
<#
.SYNOPSIS
    Installs the benchmark agent as a Windows service on a Windows client VM.

.DESCRIPTION
    1. Checks prerequisites and changes nothing if one is missing: Python 3.11 through the
       "py" launcher, and diskspd.exe (-DiskSpdPath, else found on the machine PATH).
    2. Installs the project wheel with "py -3.11 -m pip install <WheelPath>[agent]" (the
       agent's extra: no API packages). pip fetches the wheel's declared dependencies from
       the configured package index, unless -WheelHouse
       names a folder of wheels (then --no-index: nothing is downloaded). The script itself
       downloads nothing.
    3. Writes the agent's JSON config to $env:ProgramData\benchagent\config.json (keys api_url,
       queue_uri, pool, mounts, managed_identity_client_id, imds=true, diskspd_binary,
       work_dir; api_scope when given). diskspd_binary is DiskSpd's absolute path: a service
       started right after the machine PATH changed would not see the new PATH.
    4. Registers the service with New-Service and starts it. Its binary is python.exe
       itself: "python -m agent.winservice --config <config path>" (agent/winservice.py)
       speaks the Service Control Manager's protocol through advapi32, so no service wrapper
       (NSSM, pywin32) is downloaded. It runs as LocalSystem; a stop lets the agent finish
       its current item. Recovery actions restart it when it exits on its own or with an
       error (sc.exe failure, and failureflag for exits that are not crashes).

    Mounts. The service runs as LocalSystem, which does not see drive letters mapped in a
    user's logon session (net use Z: ... as an administrator is invisible to it). For Azure
    Files give UNC paths (\\<account>.file.core.windows.net\<share>) with access that works
    for the computer account (identity-based access, or a key stored for SYSTEM with
    cmdkey run as SYSTEM), or local paths on disks attached to the VM.

.NOTES
    The agent runs engine "diskspd" work items with diskspd_binary (agent/diskspd_item.py);
    Windows mount paths are checked as DiskSpd targets (core.engines.diskspd_command). The
    log is $env:ProgramData\benchagent\agent.log (rotated at 10 MiB).

.EXAMPLE
    .\install-agent.ps1 -ApiUrl https://bench-api.azurewebsites.net `
        -QueueUri https://benchstore.queue.core.windows.net/work -Pool win `
        -Mounts @{ share = '\\benchfiles.file.core.windows.net\bench'; scratch = 'F:\bench' } `
        -WheelPath C:\install\benchsvc-0.1.0-py3-none-any.whl `
        -DiskSpdPath 'C:\Program Files\benchsvc\bin\diskspd.exe' `
        -ManagedIdentityClientId 00000000-0000-0000-0000-000000000000
#>
[CmdletBinding()]
param(
    [Parameter(Mandatory)] [ValidatePattern('^https?://')] [string] $ApiUrl,
    [Parameter(Mandatory)] [ValidatePattern('^https?://')] [string] $QueueUri,
    # Same rule as core.models.POOL_PATTERN (-cmatch: ValidatePattern ignores case).
    [ValidateScript({ $_ -cmatch '^[a-z0-9](?:[a-z0-9-]{0,28}[a-z0-9])?\z' })] [string] $Pool = 'default',
    # Mount alias (lowercase, as core.models.ALIAS_PATTERN) -> directory the agent may load.
    [Parameter(Mandatory)] [hashtable] $Mounts,
    # The project wheel, e.g. built with "python -m build --wheel".
    [Parameter(Mandatory)] [string] $WheelPath,
    # Client id of a user-assigned managed identity; omit for the system-assigned one.
    [string] $ManagedIdentityClientId,
    # Entra ID scope of the API (the agent's api_scope); without it the agent sends no token.
    [string] $ApiScope,
    # A folder of wheels for the dependencies, for VMs without access to a package index.
    [string] $WheelHouse,
    # diskspd.exe (amd64) by absolute path; without it, the one on the machine PATH.
    [string] $DiskSpdPath,
    [ValidatePattern('^[A-Za-z][A-Za-z0-9_-]{0,63}$')] [string] $ServiceName = 'benchagent'
)

Set-StrictMode -Version Latest
$ErrorActionPreference = 'Stop'

# ------------------------------------------------------------------ prerequisites (no changes)

function Find-OnMachinePath([string] $exe) {
    # The service runs as LocalSystem, which sees the machine PATH only, not this user's.
    $dirs = [Environment]::GetEnvironmentVariable('Path', 'Machine') -split ';' | Where-Object { $_ }
    foreach ($dir in $dirs) {
        $candidate = Join-Path ([Environment]::ExpandEnvironmentVariables($dir)) $exe
        if (Test-Path -LiteralPath $candidate -PathType Leaf) { return $candidate }
    }
    return $null
}

$problems = New-Object System.Collections.Generic.List[string]

$diskspd = $null
if ($DiskSpdPath) {
    if (Test-Path -LiteralPath $DiskSpdPath -PathType Leaf) {
        $diskspd = (Resolve-Path -LiteralPath $DiskSpdPath).Path
    } else {
        $problems.Add("DiskSpdPath '$DiskSpdPath' is not a file.")
    }
} else {
    $diskspd = Find-OnMachinePath 'diskspd.exe'
    if (-not $diskspd) {
        $problems.Add('diskspd.exe was not given (-DiskSpdPath) nor found on the machine PATH. Get ' +
            'DiskSpd.zip from https://github.com/microsoft/diskspd/releases (latest release), copy ' +
            'amd64\diskspd.exe to a folder such as C:\Program Files\DiskSpd and pass -DiskSpdPath.')
    }
}

function Get-Python311 {
    # py.exe writes to stderr when 3.11 is missing; in Windows PowerShell a redirected native
    # stderr line is an error record, which 'Stop' would turn into an exception.
    $ErrorActionPreference = 'Continue'
    $out = & py.exe -3.11 -c 'import sys; print(sys.executable)' 2>$null
    if ($LASTEXITCODE -ne 0 -or -not $out) { return $null }
    return [string] ($out | Select-Object -Last 1)
}

$python = $null
if (-not (Get-Command py.exe -ErrorAction SilentlyContinue)) {
    $problems.Add('The Python launcher (py.exe) is missing: install Python 3.11 for all users from ' +
        'https://www.python.org/downloads/windows/ (it installs py.exe).')
} else {
    $python = Get-Python311
    if (-not $python) {
        $problems.Add('py -3.11 found no Python 3.11: install Python 3.11 for all users.')
    } elseif ($python -like "$env:SystemDrive\Users\*") {
        # A per-user install works for LocalSystem only by accident of ACLs; say so.
        Write-Warning "Python 3.11 is installed for one user ($python); an all-users install is safer for a service."
    }
}

if (-not (Test-Path -LiteralPath $WheelPath -PathType Leaf) -or $WheelPath -notlike '*.whl') {
    $problems.Add("WheelPath '$WheelPath' is not a .whl file.")
}
if ($WheelHouse -and -not (Test-Path -LiteralPath $WheelHouse -PathType Container)) {
    $problems.Add("WheelHouse '$WheelHouse' is not a folder.")
}

$mountMap = [ordered]@{}
if ($Mounts.Count -eq 0) { $problems.Add('Mounts is empty: give at least one alias = directory.') }
foreach ($alias in ($Mounts.Keys | Sort-Object)) {
    $path = [string] $Mounts[$alias]
    if ($alias -cnotmatch '^[a-z][a-z0-9-]{0,30}\z') {
        $problems.Add("Mount alias '$alias' must be lowercase letters, digits and '-', starting with a letter.")
    }
    # Same characters as core.diskspd's target check: no spaces, quotes or ;&|<>. \z, not $,
    # which would also match before a trailing newline.
    if ($path -notmatch '^(?:[A-Za-z]:\\|\\\\[A-Za-z0-9._-]+\\[A-Za-z0-9._-]+)(?:[A-Za-z0-9._\\-]*)\z') {
        $problems.Add("Mount '$alias' = '$path' must be a drive directory (F:\bench) or a UNC share, without spaces or quotes.")
    } elseif ($path -match '(?:^|\\)\.+(?:\\|$)') {
        $problems.Add("Mount '$alias' = '$path' must not contain '.' or '..' components.")
    } elseif ($path -match '^[A-Za-z]:\\' -and -not (Test-Path -LiteralPath $path -PathType Container)) {
        $problems.Add("Mount '$alias' = '$path' is not a directory on this machine.")
    }
    $mountMap[$alias] = $path
}

if ($problems.Count -gt 0) {
    $problems | ForEach-Object { Write-Host "ERROR: $_" -ForegroundColor Red }
    throw "Prerequisites missing; nothing was changed."
}
Write-Host "diskspd.exe: $diskspd"
Write-Host "python:      $python"

# ------------------------------------------------------------------ Python side

# --upgrade replaces an older installed version; a rebuilt wheel with the same version
# number is not reinstalled: bump the version or uninstall benchsvc first.
$pipArgs = @('-3.11', '-m', 'pip', 'install', '--upgrade', '--disable-pip-version-check')
if ($WheelHouse) { $pipArgs += @('--no-index', '--find-links', $WheelHouse) }
$pipArgs += ($WheelPath + '[agent]')  # the agent's extra (pyproject.toml)
& py.exe @pipArgs
if ($LASTEXITCODE -ne 0) { throw "pip install failed (exit code $LASTEXITCODE)." }
# The service's module and the DiskSpd engine, as installed with the agent's extra
# (tests/test_windows_installer.py runs this line against the built wheel).
& $python -c 'import agent.__main__, agent.winservice, agent.diskspd_item, core.engines.diskspd_command, core.engines.diskspd_xml'
if ($LASTEXITCODE -ne 0) { throw 'The agent does not import after installation.' }

# ------------------------------------------------------------------ config

$configDir = Join-Path $env:ProgramData 'benchagent'
$configPath = Join-Path $configDir 'config.json'
New-Item -ItemType Directory -Force -Path $configDir | Out-Null
# The service runs as SYSTEM with this config: only Administrators and SYSTEM may change it
# (ProgramData lets ordinary users create and own files). SIDs, so any Windows language works.
& icacls.exe $configDir /inheritance:r /grant:r '*S-1-5-32-544:(OI)(CI)F' '*S-1-5-18:(OI)(CI)F' '*S-1-5-32-545:(OI)(CI)RX' | Out-Null
if ($LASTEXITCODE -ne 0) { throw "icacls failed on $configDir (exit code $LASTEXITCODE)." }

$clientId = $null  # null: the system-assigned identity
if ($ManagedIdentityClientId) { $clientId = $ManagedIdentityClientId }
$config = [ordered]@{
    api_url                    = $ApiUrl
    queue_uri                  = $QueueUri
    pool                       = $Pool
    mounts                     = $mountMap
    managed_identity_client_id = $clientId
    imds                       = $true
    diskspd_binary             = $diskspd
    work_dir                   = (Join-Path $configDir 'work')
}
if ($ApiScope) { $config['api_scope'] = $ApiScope }
$json = $config | ConvertTo-Json -Depth 4
# UTF-8 without a byte order mark: Windows PowerShell's "-Encoding UTF8" writes one, and the
# agent's json.loads would choke on it.
[IO.File]::WriteAllText($configPath, $json, (New-Object System.Text.UTF8Encoding($false)))
Write-Host "config:      $configPath"

# ------------------------------------------------------------------ service

$existing = Get-Service -Name $ServiceName -ErrorAction SilentlyContinue
if ($existing) {
    # Reinstall: stop and delete, then register afresh with the current settings.
    if ($existing.Status -ne 'Stopped') { Stop-Service -Name $ServiceName -Force }
    & sc.exe delete $ServiceName | Out-Null
    if ($LASTEXITCODE -ne 0) { throw "sc.exe delete $ServiceName failed (exit code $LASTEXITCODE)." }
    # The SCM deletes the key once no handle is open; wait for it.
    for ($i = 0; $i -lt 30 -and (Get-Service -Name $ServiceName -ErrorAction SilentlyContinue); $i++) {
        Start-Sleep -Seconds 1
    }
}

# python.exe is the service binary: agent.winservice calls StartServiceCtrlDispatcherW itself.
$binary = '"{0}" -m agent.winservice --config "{1}"' -f $python, $configPath
New-Service -Name $ServiceName `
    -BinaryPathName $binary `
    -DisplayName 'Storage benchmark agent' `
    -Description 'Claims benchmark work items from the queue and runs them (python -m agent.winservice).' `
    -StartupType Automatic | Out-Null

# Restart after 5 s, 5 s, then every minute; forget failures after a day. failureflag 1: also
# when the service stops with an error status rather than crashing (a bad configuration, an
# agent that ended on its own).
& sc.exe failure $ServiceName reset= 86400 actions= restart/5000/restart/5000/restart/60000 | Out-Null
if ($LASTEXITCODE -ne 0) { throw "sc.exe failure $ServiceName failed (exit code $LASTEXITCODE)." }
& sc.exe failureflag $ServiceName 1 | Out-Null
if ($LASTEXITCODE -ne 0) { throw "sc.exe failureflag $ServiceName failed (exit code $LASTEXITCODE)." }

Start-Service -Name $ServiceName
Get-Service -Name $ServiceName | Format-Table -AutoSize Name, Status, StartType
Write-Host "Agent log: $(Join-Path $configDir 'agent.log')"
