"""The controller ⇄ replica protocol: messages, framing, transport, stages, history.

Modules: :mod:`~spate.protocol.compute` and :mod:`~spate.protocol.storage` (messages),
:mod:`~spate.protocol.frame` (length-checked
frames), :mod:`~spate.protocol.handshake` (mutual HMAC), :mod:`~spate.protocol.transport`
(TCP: ``connect``, ``connect_retrying``, ``serve``), :mod:`~spate.protocol.memory` (in-memory
transport for tests), :mod:`~spate.protocol.stages` (replica-side stage checks),
:mod:`~spate.protocol.history` and :mod:`~spate.protocol.storage_history` (command histories).
Values are encoded by :mod:`spate.codec` (strict msgpack over the types registered with
:mod:`spate.wire`), which sit on the ground floor so that every layer can register its types.
"""
