"""The one HTTP transport to the service API, shared by the agent and benchctl.

Each keeps its own calls (``agent/api_client.py``, ``benchctl/client.py``); what they share
lives here: the httpx client with the caller's headers, Entra ID tokens through azure-core's
``BearerTokenCredentialPolicy`` (``auth``), one mapping of answers to errors
(``transport``) and the time-budgeted retry (``retry``).
"""

from apiclient.retry import retrying
from apiclient.transport import Refused, Transport, Unavailable

__all__ = ["Refused", "Transport", "Unavailable", "retrying"]
