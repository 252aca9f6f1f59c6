"""Every hook call guarded and tagged: pluggy's manager with each implementation (wrappers
included) run through a guard that applies the hook's failure policy (carried by its spec in
:mod:`mosaic_core.hookspecs`), and each result tagged with the plugin that produced it while
pluggy runs it (conda's ``_hookexec`` wrapping), so accessors never match results back by
identity. :class:`mosaic_core.plugins.PluginHost` owns one and records the failures."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Protocol

import pluggy

from mosaic_core import hookspecs
from mosaic_core.errors import PluginError, UsageError


class FailureRecorder(Protocol):
    """Where a guarded implementation's failure is recorded (:class:`mosaic_core.plugins.PluginHost`)."""

    def record_failure(self, plugin: str, hook: str, error: str) -> None: ...


class Tagged:
    """One implementation's result as pluggy carries it through an accessor's call: the value
    and the plugin that produced it (a ``wrapper=True`` implementation sees plain values)."""

    __slots__ = ("plugin", "value")

    def __init__(self, plugin: str, value: Any):
        self.plugin, self.value = plugin, value

    def __repr__(self) -> str:
        return f"{self.plugin}: {self.value!r}"


def _retag(out: Any, tagged: list[Tagged], plugin: str) -> Any:
    """Tag what a wrapper returned: the results it passed on keep their producer (matched in
    order, so two plugins returning one object stay two), anything it added is its own."""
    if not isinstance(out, list):
        return out
    retagged, j = [], 0
    for item in out:
        k = next((k for k in range(j, len(tagged)) if tagged[k].value is item), None)
        if k is None:
            retagged.append(Tagged(plugin, item))
        else:
            retagged.append(tagged[k])
            j = k + 1
    return retagged


class GuardedManager(pluggy.PluginManager):
    """pluggy's manager, with every implementation of a hook (wrappers included) run through a
    guard applying the hook's failure policy; during an accessor's call each result is also
    tagged with its plugin (conda's ``_hookexec`` wrapping). Guarded copies of pluggy's
    ``HookImpl`` are cached until the next (un)registration."""

    def __init__(self, host: FailureRecorder):
        super().__init__(hookspecs.PROJECT)
        self.policy: dict[str, str] = {}  # hook name -> STOP or ISOLATE, from every spec added
        self._host = host
        self.tagging = threading.local()  # .on: the next hook call (an accessor's) tags its results
        self._guarded: dict[tuple[int, bool], tuple[Any, Any]] = {}

    def _hookexec(self, hook_name: str, methods: Any, kwargs: Any, firstresult: bool) -> Any:
        local = self.tagging
        tag, local.on = getattr(local, "on", False), False  # only the accessor's own call is tagged
        policy = self.policy.get(hook_name)
        if policy is not None:
            methods = [self._guard(hook_name, policy, impl, tag) for impl in methods]
        return super()._hookexec(hook_name, methods, kwargs, firstresult)

    def _guard(self, hook: str, policy: str, impl: Any, tag: bool) -> Any:
        cached = self._guarded.get((id(impl), tag))
        if cached is not None and cached[0] is impl:
            return cached[1]
        if impl.wrapper:
            guarded = self._guard_wrapper(hook, policy, impl, tag)
        elif impl.hookwrapper:
            guarded = self._guard_old_wrapper(hook, policy, impl, tag)
        else:
            guarded = self._guard_call(hook, policy, impl, tag)
        copy = type(impl)(impl.plugin, impl.plugin_name, functools.wraps(impl.function)(guarded), impl.opts)
        self._guarded[(id(impl), tag)] = (impl, copy)
        return copy

    def _failed(self, hook: str, policy: str, plugin: str, exc: BaseException) -> None:
        """Apply the policy to ``plugin``'s exception: raise (stop) or record it (isolate)."""
        if isinstance(exc, PluginError) or not isinstance(exc, Exception):
            raise exc
        if isinstance(exc, UsageError):  # a config hook's own message for the user (exit 2), as it is
            if policy == hookspecs.STOP:
                raise exc
            self._host.record_failure(plugin, hook, "raised a usage error outside a config hook")
            return
        if policy == hookspecs.STOP:
            raise PluginError(f"plugin {plugin!r} failed in {hook}: {type(exc).__name__}: {exc}") from exc
        self._host.record_failure(plugin, hook, f"{type(exc).__name__}: {exc}")

    def _guard_call(self, hook: str, policy: str, impl: Any, tag: bool) -> Callable[..., Any]:
        plugin, function = impl.plugin_name, impl.function

        def guarded(*args: Any) -> Any:
            try:
                result = function(*args)
            except Exception as exc:
                self._failed(hook, policy, plugin, exc)
                return None
            return Tagged(plugin, result) if tag and result is not None else result

        return guarded

    def _start(self, hook: str, policy: str, plugin: str, function: Callable[..., Any], args: Any) -> Any:
        """A wrapper's generator, run to its ``yield``; None when it failed (then it is skipped)."""
        try:
            gen = function(*args)
            next(gen)
            return gen
        except StopIteration:
            self._failed(hook, policy, plugin, RuntimeError("the wrapper did not yield"))
        except Exception as exc:
            self._failed(hook, policy, plugin, exc)
        return None

    def _guard_wrapper(self, hook: str, policy: str, impl: Any, tag: bool) -> Callable[..., Any]:
        plugin, function = impl.plugin_name, impl.function

        def guarded(*args: Any) -> Any:
            gen = self._start(hook, policy, plugin, function, args)
            if gen is None:
                return (yield)  # as if the wrapper were absent
            try:
                results = yield
            except BaseException as inner:  # what the wrapped call raised: the wrapper may handle it
                try:
                    gen.throw(inner)
                except StopIteration as stop:
                    return stop.value
                except BaseException as exc:
                    if exc is not inner:
                        self._failed(hook, policy, plugin, exc)
                    raise inner from None
                self._failed(hook, policy, plugin, RuntimeError("the wrapper yielded twice"))
                raise inner from None
            plain = [r.value if isinstance(r, Tagged) else r for r in results] if tag else results
            try:
                gen.send(plain)
            except StopIteration as stop:
                return _retag(stop.value, results, plugin) if tag else stop.value
            except Exception as exc:
                self._failed(hook, policy, plugin, exc)
                return results
            self._failed(hook, policy, plugin, RuntimeError("the wrapper yielded twice"))
            return results

        return guarded

    def _guard_old_wrapper(self, hook: str, policy: str, impl: Any, tag: bool) -> Callable[..., Any]:
        plugin, function = impl.plugin_name, impl.function

        def guarded(*args: Any) -> Any:
            gen = self._start(hook, policy, plugin, function, args)
            outcome = yield
            if gen is None:
                return
            results = None if outcome.exception else outcome.get_result()
            plain = [r.value if isinstance(r, Tagged) else r for r in results] if tag and results else results
            seen = pluggy.Result(plain, outcome.exception)
            try:
                gen.send(seen)
            except StopIteration:
                pass
            except Exception as exc:
                self._failed(hook, policy, plugin, exc)
                return
            else:
                self._failed(hook, policy, plugin, RuntimeError("the wrapper yielded twice"))
                return
            if seen.exception is not outcome.exception and seen.exception is not None:
                outcome.force_exception(seen.exception)
            elif seen.exception is None and (outcome.exception is not None or seen.get_result() is not plain):
                out = seen.get_result()
                outcome.force_result(_retag(out, results or [], plugin) if tag else out)

        return guarded

    def add_hookspecs(self, module_or_class: Any) -> None:
        """pluggy's, refusing a spec without a failure policy (``@hookspec(STOP|ISOLATE)``)."""
        policies = {}
        for name in dir(module_or_class):
            if self.parse_hookspec_opts(module_or_class, name) is not None:
                policy = getattr(getattr(module_or_class, name), "mosaic_policy", None)
                if policy not in (hookspecs.STOP, hookspecs.ISOLATE):
                    raise ValueError(
                        f"hook spec {name} has no failure policy: mark it @hookspec(STOP) or @hookspec(ISOLATE)"
                    )
                policies[name] = policy
        super().add_hookspecs(module_or_class)
        self.policy.update(policies)
        self._guarded.clear()

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        self._guarded.clear()
        return super().register(plugin, name)

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        self._guarded.clear()
        return super().unregister(plugin, name)
