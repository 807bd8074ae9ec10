"""What a blocking call or an awaited request waits for, as small state machines: each is fed
every event of its connection and says when it is done and with what. The blocking API
(Connection.buy …) and the asyncio one (storekit.aio) share them, so both read the events the
same way."""

from ._errors import ErrorCode, PaymentError, make_error
from ._models import (ProductsReceived, ReceiptReceived, RequestResult, RestoreFinished,
                      TransactionState, TransactionsUpdated)


class Tracker:
    """Fed events until `done`; then `result()` returns the value or raises the error."""

    def __init__(self, request_id):
        self.request_id = request_id
        self.done = False
        self._value = None
        self._error = None

    def feed(self, event):
        raise NotImplementedError

    def result(self):
        if self._error is not None:
            raise self._error
        return self._value

    def _succeed(self, value):
        self.done, self._value = True, value

    def _fail(self, error):
        self.done, self._error = True, error

    def _is_own_error(self, event):
        """A RequestResult refusing this request: fails the tracker and returns True."""
        if isinstance(event, RequestResult) and event.request_id == self.request_id and not event.ok:
            self._fail(event.exception())
            return True
        return False


class ResultTracker(Tracker):
    """A request answered by a RequestResult (finish, …): its value (a transaction id)."""

    def feed(self, event):
        if self.done or self._is_own_error(event):
            return
        if isinstance(event, RequestResult) and event.request_id == self.request_id:
            self._succeed(event.value)


class ProductsTracker(Tracker):
    """request_products: the ProductsReceived event."""

    def feed(self, event):
        if self.done or self._is_own_error(event):
            return
        if isinstance(event, ProductsReceived) and event.request_id == self.request_id:
            self._succeed(event)


class ReceiptTracker(Tracker):
    """request_receipt: the receipt's bytes."""

    def feed(self, event):
        if self.done or self._is_own_error(event):
            return
        if isinstance(event, ReceiptReceived) and event.request_id == self.request_id:
            self._succeed(event.data)


class PurchaseTracker(Tracker):
    """add_payment until its transaction leaves `purchasing`: the Transaction when purchased or
    restored; PaymentError when the payment is refused (no transaction), or its transaction fails
    or is deferred (the transaction attached).

    The daemon pushes a payment's transaction states before it answers the request with the
    transaction's id (docs/protocol.md §8), so every transaction updated meanwhile is kept until
    the id tells which one is this payment's.
    """

    def __init__(self, request_id, product_id):
        super().__init__(request_id)
        self.product_id = product_id
        self.transaction_id = None
        self._seen = {}

    def feed(self, event):
        if self.done:
            return
        if isinstance(event, RequestResult) and event.request_id == self.request_id:
            if not event.ok:
                # The daemon refused the payment (1…18): PaymentError. The library's own codes
                # (a lost connection: the payment may have gone through) keep their classes.
                refused = event.error < ErrorCode.BAD_ARGUMENT
                self._fail(event.exception(PaymentError if refused else None))
                return
            self.transaction_id = event.value
        elif isinstance(event, TransactionsUpdated):
            for transaction in event.transactions:
                known = self._seen.get(transaction.id)
                # A snapshot after a reconnect may show an older state again: never go back to purchasing.
                if known is None or transaction.state != TransactionState.PURCHASING:
                    self._seen[transaction.id] = transaction
        else:
            return
        transaction = self._seen.get(self.transaction_id) if self.transaction_id else None
        if transaction is None or transaction.state == TransactionState.PURCHASING:
            return
        if transaction.state in (TransactionState.PURCHASED, TransactionState.RESTORED):
            self._succeed(transaction)
        elif transaction.state == TransactionState.FAILED:
            detail = transaction.error_message or "no reason given"
            error = make_error(ErrorCode.STOREKIT, f"the purchase of {self.product_id} failed "
                               f"(transaction {transaction.transaction_identifier}): {detail}",
                               transaction.error_code if transaction.error_code is not None else 0, PaymentError)
            error.transaction = transaction
            self._fail(error)
        elif transaction.state == TransactionState.DEFERRED:
            self._fail(PaymentError(
                ErrorCode.STOREKIT,
                f"the purchase of {self.product_id} is deferred (Ask to Buy): transaction "
                f"{transaction.transaction_identifier} is decided later and arrives as an update",
                transaction=transaction))


class RestoreTracker(Tracker):
    """restore: the transactions it restored (state restored), once it finished."""

    def __init__(self, request_id):
        super().__init__(request_id)
        self._restored = []

    def feed(self, event):
        if self.done or self._is_own_error(event):
            return
        if isinstance(event, TransactionsUpdated):
            self._restored.extend(t for t in event.transactions if t.state == TransactionState.RESTORED)
        elif isinstance(event, RestoreFinished) and event.request_id in (0, self.request_id):
            if event.ok:
                self._succeed(list(self._restored))
            else:
                self._fail(make_error(event.error, event.message))
        elif isinstance(event, RequestResult) and event.request_id == self.request_id:
            # The request's own answer ends the restore as well as RESTORE_FINISHED does,
            # whichever the library delivers first.
            self._succeed(list(self._restored))
