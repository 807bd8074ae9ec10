"""storekit for asyncio: the same connection, driven by the event loop (no threads).

    import storekit.aio

    async with storekit.aio.connect("com.example.game") as conn:
        transaction = await conn.buy("com.example.game.level_pack")
        await conn.finish(transaction)

        async for update in conn.updates():      # like StoreKit 2's Transaction.updates
            ...

The connection's descriptor is watched with loop.add_reader; each time it is readable the
connection dispatches, and the events resolve the awaited requests and feed the updates
iterators. Opening blocks the loop until storekitd answers the hello (normally a few
milliseconds; at most STOREKIT_CONNECT_TIMEOUT seconds while the daemon starts).
"""

import asyncio

from . import _connection
from ._errors import ErrorCode, StoreKitError
from ._models import TransactionsUpdated
from ._trackers import ProductsTracker, PurchaseTracker, ReceiptTracker, RestoreTracker, ResultTracker

_CLOSED = object()


class Connection:
    """A storekit.Connection for asyncio; create it (or `await connect(app)`) inside a running loop."""

    def __init__(self, app_id):
        self._loop = asyncio.get_running_loop()
        self.sync = _connection.Connection(app_id)
        self._waiters = []
        self._queues = []
        self._kick_scheduled = False
        self.sync._listeners.append(self._on_event)
        self._fd = self.sync.fileno()
        self._loop.add_reader(self._fd, self._on_readable)
        try:
            # Subscribed from the start, so that updates() sees every push from now on.
            self.sync._ensure_subscribed()
            self._kick()
        except BaseException:
            self.close()
            raise

    # ---- lifetime ------------------------------------------------------------------------

    def close(self):
        """Stops watching the descriptor, closes the connection, fails what was awaited and ends
        every updates() iterator."""
        if self.sync.closed:
            return
        self._loop.remove_reader(self._fd)
        self.sync.close()
        error = StoreKitError(ErrorCode.DISCONNECTED, "the connection was closed")
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(error)
        self._waiters.clear()
        for queue in self._queues:
            queue.put_nowait(_CLOSED)

    async def aclose(self):
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info):
        self.close()

    @property
    def closed(self):
        return self.sync.closed

    @property
    def app_id(self):
        return self.sync.app_id

    @property
    def uid(self):
        return self.sync.uid

    @property
    def storefront(self):
        return self.sync.storefront

    def fileno(self):
        return self._fd

    def set_observer(self, observer):
        """As storekit.Connection.set_observer; the observer runs in the loop's callbacks."""
        self.sync.set_observer(observer)
        self._kick()

    # ---- the loop's side ------------------------------------------------------------------

    def _on_readable(self):
        self._kick_scheduled = False
        if self.sync.closed:
            return
        try:
            self.sync.dispatch()
        except StoreKitError as error:
            # The handle cannot go on: every awaited request fails with it.
            for _, future in self._waiters:
                if not future.done():
                    future.set_exception(error)
            self._waiters.clear()
        except Exception as error:  # the app's observer raised
            self._loop.call_exception_handler({
                "message": "storekit observer raised", "exception": error, "connection": self})

    def _kick(self):
        """Dispatches soon, so that requests just made are sent even before anything arrives."""
        if not self._kick_scheduled:
            self._kick_scheduled = True
            self._loop.call_soon(self._on_readable)

    def _on_event(self, event):
        for entry in list(self._waiters):
            tracker, future = entry
            if future.done():  # cancelled, timed out
                self._waiters.remove(entry)
                continue
            tracker.feed(event)
            if tracker.done:
                self._waiters.remove(entry)
                try:
                    future.set_result(tracker.result())
                except BaseException as error:  # noqa: BLE001 — the request's own failure
                    future.set_exception(error)
        if isinstance(event, TransactionsUpdated):
            for queue in self._queues:
                for transaction in event.transactions:
                    queue.put_nowait(transaction)

    async def _await(self, tracker, timeout):
        future = self._loop.create_future()
        self._waiters.append((tracker, future))
        self._kick()
        if timeout is None:
            return await future
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise _connection.TimedOutError(
                ErrorCode.TIMED_OUT, f"no answer from storekitd within {timeout:g} s (request {tracker.request_id})") from None

    # ---- requests --------------------------------------------------------------------------

    async def products(self, product_ids, timeout=None):
        """ProductsReceived (.products, .invalid_identifiers)."""
        return await self._await(ProductsTracker(self.sync.request_products(product_ids)), timeout)

    async def buy(self, product_id, quantity=1, application_username=None, timeout=None):
        """The transaction once purchased (or restored); PaymentError when refused, failed or
        deferred (as storekit.Connection.buy)."""
        request = self.sync.add_payment(product_id, quantity, application_username)
        return await self._await(PurchaseTracker(request, product_id), timeout)

    async def finish(self, transaction, timeout=None):
        """finishTransaction, answered (raises when refused, e.g. TransactionNotFoundError)."""
        await self._await(ResultTracker(self.sync.finish(transaction)), timeout)

    async def restore(self, application_username=None, timeout=None):
        """restoreCompletedTransactions: the transactions restored (finish each)."""
        return await self._await(RestoreTracker(self.sync.restore(application_username)), timeout)

    async def receipt(self, timeout=None):
        """The app receipt, refreshed (PKCS#7 DER bytes)."""
        return await self._await(ReceiptTracker(self.sync.request_receipt()), timeout)

    def updates(self):
        """An async iterator of every transaction update pushed to this connection from now on
        (StoreKit 2's Transaction.updates): purchases made by other processes of the same user
        and app, renewals, Ask to Buy decisions, refunds — and this connection's own. It ends
        when the connection closes."""
        if self.sync.closed:
            raise StoreKitError(ErrorCode.BAD_ARGUMENT, "the connection is closed")
        return _Updates(self)

    def verify_jws(self, jws, root_certificate=None):
        """As storekit.Connection.verify_jws (offline, does not block on the daemon)."""
        return self.sync.verify_jws(jws, root_certificate)

    def verify_receipt(self, receipt):
        return self.sync.verify_receipt(receipt)


class _Updates:
    """The queue of one updates() iterator, registered when it is made (not on first iteration),
    so nothing pushed between updates() and the first `async for` step is lost."""

    def __init__(self, connection):
        self._connection = connection
        self._queue = asyncio.Queue()
        connection._queues.append(self._queue)

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._queue is None:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is _CLOSED:
            self._detach()
            raise StopAsyncIteration
        return item

    async def aclose(self):
        self._detach()

    def _detach(self):
        if self._queue is not None:
            try:
                self._connection._queues.remove(self._queue)
            except ValueError:
                pass
            self._queue = None


class connect:
    """`conn = await connect(app)` or `async with connect(app) as conn`."""

    def __init__(self, app_id):
        self._app_id = app_id
        self._connection = None

    def __await__(self):
        return self._open().__await__()

    async def _open(self):
        return Connection(self._app_id)

    async def __aenter__(self):
        self._connection = Connection(self._app_id)
        return self._connection

    async def __aexit__(self, *exc_info):
        self._connection.close()


__all__ = ["Connection", "connect"]
