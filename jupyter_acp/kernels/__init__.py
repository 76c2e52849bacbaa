"""One kernel client layer for local kernels and kernels behind a Jupyter Gateway.

``bridge.KernelBridge`` is what the tools, server-side execution and the variable tools use (with
``facts.KernelFacts``: a kernel's name, language, state and location, read without asking the kernel);
``client.KernelConnection`` one client of one kernel (its requests), on ``channels.KernelChannels`` (the
transport: jupyter_server's ``manager.client()``, ZMQ for a local kernel, or ``gateway``'s
``GatewayKernelClient`` over the gateway's WebSocket for a remote one, replies routed); ``summarise`` the
read-only summariser whose source runs inside the kernel; ``messages`` the errors and helpers.
"""

from .bridge import HIDDEN_NAMES, PSEUDO_VARIABLES, KernelBridge, summariser_source, summary_expression
from .channels import IopubCallback
from .client import KernelConnection
from .gateway import is_gateway_manager
from .messages import ANSI_RE, KernelTimeout, KernelUnavailable, clip, describe, output_from_msg, strip_ansi

__all__ = [
    "ANSI_RE",
    "HIDDEN_NAMES",
    "PSEUDO_VARIABLES",
    "IopubCallback",
    "KernelBridge",
    "KernelConnection",
    "KernelTimeout",
    "KernelUnavailable",
    "clip",
    "describe",
    "is_gateway_manager",
    "output_from_msg",
    "strip_ansi",
    "summariser_source",
    "summary_expression",
]
