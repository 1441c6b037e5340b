"""Connection details of the local emulators, used only in BENCH_LOCAL_EMULATORS mode.

These are the emulators' published well-known development credentials (Azurite's
devstoreaccount1 key and the Cosmos DB emulator key), not secrets: they open nothing in Azure.
"""

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
COSMOS_EMULATOR_KEY = (
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
)


def azurite_queue_uri(port: int, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{port}/{AZURITE_ACCOUNT}"


def azurite_blob_uri(port: int, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{port}/{AZURITE_ACCOUNT}"
