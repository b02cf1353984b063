"""The package's public surface stays what it was: the public names in
ratelimit and ratelimit.aio, each public object's module, qualified name, signature and
docstring, the reprs of live objects and what pickles. api_surface.json was
recorded from the code before it was split into modules by concern.

Record again (only when the surface is meant to change):
    python bindings/python/tests/test_api_surface.py REDIS_URL > bindings/python/tests/api_surface.json"""
import asyncio
import inspect
import json
import pickle
import re
import sys
import typing
from pathlib import Path

import ratelimit
import ratelimit.aio

EXPECTED = Path(__file__).with_name("api_surface.json")


def _doc(obj):
    """the object's own docstring; None for one it has from its type (a
    value's, a TypeVar's, a typing alias's): those are CPython's and change
    between its versions"""
    doc = inspect.getdoc(obj)
    return None if doc == inspect.getdoc(type(obj)) else doc


def _ours(cls, name):
    """whether the class member comes from this package, not from a builtin
    base class (BaseException.add_note: CPython's, since 3.11)"""
    owner = next((k for k in cls.__mro__ if name in vars(k)), None)
    return getattr(owner, "__module__", "").startswith("ratelimit")


def _describe(obj):
    # typing's aliases (Union[...], Callable[...]): their class and signature
    # are typing's, changed in 3.14; what they alias is in the stubs
    origin = typing.get_origin(obj)
    alias = origin is not None
    # an alias's name is its origin's (3.9's aliases have no __qualname__)
    qualname = getattr(origin, "__name__", None) or origin._name if alias else getattr(obj, "__qualname__", None)
    out = {"type": "alias" if alias else type(obj).__name__, "module": getattr(obj, "__module__", None),
           "qualname": qualname, "doc": _doc(obj)}
    try:
        out["signature"] = None if alias else str(inspect.signature(obj))
    except (TypeError, ValueError):
        out["signature"] = None
    if inspect.isclass(obj):
        out["members"] = {name: {"kind": type(inspect.getattr_static(obj, name)).__name__,
                                 "doc": _doc(getattr(obj, name, None))}
                          for name in sorted(dir(obj))
                          if (not name.startswith("_") or name in ("__init__",)) and _ours(obj, name)}
    return out


def _pickles(obj):
    try:
        return repr(pickle.loads(pickle.dumps(obj)))
    except Exception as e:  # what fails to pickle must go on failing the same way
        return "%s: %s" % (type(e).__name__, e)


def _live(url):
    """reprs and pickling of objects a program holds"""
    out = {}
    with ratelimit.Client(url, prefix="surface", client_id="surface-test") as client:
        lim = client.limiter("api", "10/second", algorithm="token_bucket", burst=20)
        objects = {
            "client": client, "limiter": lim, "config": lim.config, "result": lim.peek("u"),
            "semaphore": client.semaphore("s", permits=2, lease=5.0), "lock": client.lock("l", lease=5.0),
            "queue": client.delay_queue("q"),
            "exceeded": ratelimit.RateLimitExceeded(1.5), "invalid": ratelimit.InvalidArgument("bad"),
        }
        permit = objects["semaphore"].acquire(timeout=1.0)
        objects["permit"] = permit
        for name, obj in objects.items():
            text = repr(obj)
            if name == "permit":
                text = text.replace(permit.id, "<id>")
            out[name] = {"repr": text, "pickled": _pickles(obj).replace(getattr(obj, "id", None) or "\0", "<id>")}
        permit.release()
        out["closed_client"] = repr(client.__exit__(None, None, None) or client)

    async def aio():
        got = {}
        async with ratelimit.aio.AsyncClient(url, prefix="surface", client_id="surface-test") as client:
            lim = client.limiter("api", "10/second")
            for name, obj in {"client": client, "limiter": lim, "semaphore": client.semaphore("s", 2, 5.0),
                              "lock": client.lock("l", 5.0), "queue": client.delay_queue("q")}.items():
                got[name] = repr(obj)
        return got
    out["aio"] = asyncio.run(aio())
    return out


def _public(module):
    """dir(module) without private names, modules and typing's own names
    (what a module imports for itself is no API; its type aliases are)"""
    return [name for name in dir(module) if not name.startswith("_") and not inspect.ismodule(getattr(module, name))
            and getattr(typing, name, None) is not getattr(module, name)]


def surface(url):
    return {
        "ratelimit": {name: _describe(getattr(ratelimit, name)) for name in _public(ratelimit) + ["__version__"]},
        "ratelimit.aio": {name: _describe(getattr(ratelimit.aio, name)) for name in _public(ratelimit.aio)},
        "dir": {"ratelimit": _public(ratelimit), "ratelimit.aio": _public(ratelimit.aio)},
        "all": {"ratelimit": list(ratelimit.__all__), "ratelimit.aio": list(getattr(ratelimit.aio, "__all__", []))},
        "live": _live(url),
    }


def _normalized(data):
    """addresses and fencing tokens differ from run to run"""
    text = json.dumps(data, default=repr)
    text = re.sub(r" at 0x[0-9a-fA-F]+", " at 0x?", text)  # Windows prints them in capitals
    return json.loads(re.sub(r"fencing_token=\d+", "fencing_token=?", text))


def test_public_surface_is_unchanged(server):
    expected = json.loads(EXPECTED.read_text())
    got = _normalized(surface(server.url))
    for part in expected:
        assert got[part] == expected[part], part


if __name__ == "__main__":
    print(json.dumps(_normalized(surface(sys.argv[1])), indent=1, sort_keys=True))
