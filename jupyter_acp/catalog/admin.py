"""What a server's admin fixes for its users: which agents they may enable or log in to, the built-in agent's model
form, provider keys kept on the server, and the policy values they may pick.

A JupyterHub admin configures the single-user image (``JupyterACP.allowed_user_agents``, ``builtin_model_form``,
``user_provider_keys``, ``user_policies``, ``auto_modes``). Each rule here answers ``None`` (the user may) or the
reason they may not, naming the setting: the routes refuse with it (403) and answer it as ``fixed_by_admin``, so the
panel greys the control and says why.

What "users may pick" covers for policies: the gate's own policy (``JupyterACPTools.permission_policy`` and
``tool_policies``) is server configuration, which the panel never changes. A user picks a policy for a notebook
session in two places: a permission card's "Always allow" (``allow_always``: that tool runs without asking for the
rest of the session, or the agent keeps that choice itself) and "Always reject" (``reject_always``, an agent's own
option), and the session's mode when it is one that lets the agent act without asking (``auto_modes``: the
built-in agent's ``auto``, Codex's ``full-access``, Claude's ``acceptEdits`` and ``bypassPermissions``, ...; a mode
offered as a config option of category ``mode`` counts the same). ``ask`` is always allowed: going back to
asking is never refused.

These rules hold for what the panel, the API and the ``%acp`` magic ask of the server. They are no sandbox against
the user's own code: whoever has a terminal or a kernel on the server runs what they like as themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the session modes a fresh install counts as ``auto`` (the agent acts without asking)
AUTO_MODES = ("auto", "full-access", "acceptEdits", "bypassPermissions", "yolo")
#: what each "always" answer on a permission card picks
ALWAYS_KINDS = {"allow_always": "auto", "reject_always": "deny"}


@dataclass(frozen=True)
class AdminRules:
    """The admin's controls, read from ``JupyterACP`` at each request (cheap; tests change them at run time)."""

    allowed_user_agents: tuple[str, ...] | None = None
    builtin_model_form: bool = True
    user_provider_keys: bool = True
    user_policies: tuple[str, ...] = ("ask", "auto", "deny", "review")
    auto_modes: tuple[str, ...] = AUTO_MODES

    def agent(self, name: str, doing: str) -> str | None:
        """Why the user may not ``doing`` (enable, log in to) agent ``name``, or None."""
        if self.allowed_user_agents is None or name in self.allowed_user_agents:
            return None
        listed = ", ".join(repr(n) for n in self.allowed_user_agents) or "none"
        return (
            f"{doing} agent {name!r} is not allowed on this server (rule: c.JupyterACP.allowed_user_agents, set by "
            f"the server's admin, lists {listed}); ask your admin"
        )

    def model(self) -> str | None:
        """Why the user may not set the built-in agent's model and API base, or None."""
        if self.builtin_model_form:
            return None
        return (
            "the built-in agent's model and endpoint are set by the server's admin (rule: c.JupyterACP."
            "builtin_model_form = False); ask your admin to change them"
        )

    def keys(self) -> str | None:
        """Why the user may not keep a provider key on the server, or None."""
        if self.user_provider_keys:
            return None
        return (
            "provider keys come from the server's environment, set by the admin, and are not kept from the panel "
            "(rule: c.JupyterACP.user_provider_keys = False); ask your admin"
        )

    def option(self, kind: str) -> str | None:
        """Why the user may not answer a permission card with an option of ``kind``, or None."""
        policy = ALWAYS_KINDS.get(kind)
        if policy is None or policy in self.user_policies:
            return None
        label = "Always allow" if policy == "auto" else "Always reject"
        return (
            f"{label!r} picks the policy {policy!r} for this session, which the server's admin does not let users pick "
            f"(rule: c.JupyterACP.user_policies = {list(self.user_policies)!r}); answer once instead"
        )

    def mode(self, mode_id: str) -> str | None:
        """Why the user may not switch a session to mode ``mode_id``, or None."""
        if mode_id not in self.auto_modes or "auto" in self.user_policies:
            return None
        return (
            f"mode {mode_id!r} lets the agent act without asking, i.e. the policy 'auto', which the server's admin "
            f"does not let users pick (rules: c.JupyterACP.auto_modes lists it, c.JupyterACP.user_policies = "
            f"{list(self.user_policies)!r})"
        )

    def policy(self, policy: str) -> str | None:
        """Why the user may not pick ``policy`` for a notebook session (``review``: Review after), or None."""
        if policy == "ask" or policy in self.user_policies:
            return None
        return (
            f"the policy {policy!r} is not one the server's admin lets users pick (rule: c.JupyterACP.user_policies "
            f"= {list(self.user_policies)!r}); ask your admin"
        )

    def forbidden_modes(self) -> dict[str, str]:
        """The session modes users may not pick, with the reason (what the panel greys)."""
        return {m: reason for m in self.auto_modes if (reason := self.mode(m))}
