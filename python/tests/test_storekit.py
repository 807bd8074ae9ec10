"""The storekit module against a real storekitd and the real libstorekit.

Environment (Tests/StoreKitIntegrationTests/PythonClientTests.swift sets it for a daemon it
starts on temporary directories with the sample config):
  STOREKITD_SOCKET            the daemon's client socket
  STOREKIT_LIBRARY            the libstorekit.so.0 to load
  STOREKIT_ROOT_CERTIFICATE   the daemon's root certificate (PEM)
  STOREKIT_TEST_APP           the registered app (default com.example.game, with the sample catalogue)
  STOREKITCTL, STOREKITD_CONTROL_SOCKET   storekitctl and the daemon's control socket, to drive
                              the simulated store (Ask to Buy, failures, refunds, storefront)
Without STOREKITD_SOCKET every test that needs a daemon is skipped.

Run: PYTHONPATH=python python3 -m unittest discover -s python/tests -v
"""

import asyncio
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

import storekit
import storekit.aio

APP = os.environ.get("STOREKIT_TEST_APP", "com.example.game")
COINS = APP + ".coins100"           # consumable
LEVEL_PACK = APP + ".level_pack"    # non-consumable
UNKNOWN = APP + ".no_such_product"
ROOT = os.environ.get("STOREKIT_ROOT_CERTIFICATE")
TIMEOUT = 15

needs_daemon = unittest.skipUnless(os.environ.get("STOREKITD_SOCKET"),
                                   "STOREKITD_SOCKET is not set: no storekitd to test against")


def changed(jws, part):
    """The JWS with one character of part `part` (0 header, 1 payload, 2 signature) changed."""
    parts = jws.split(".")
    text = parts[part]
    index = len(text) // 2
    parts[part] = text[:index] + ("B" if text[index] == "A" else "A") + text[index + 1:]
    return ".".join(parts)


class Recorder:
    """An observer keeping every event."""

    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event)

    def of(self, kind):
        return [event for event in self.events if isinstance(event, kind)]

    def transactions(self, kind):
        return [t for event in self.of(kind) for t in event.transactions]


@needs_daemon
class ConnectionTests(unittest.TestCase):
    def setUp(self):
        self.connection = storekit.Connection(APP)
        self.addCleanup(self.connection.close)

    def test_connects_with_uid_storefront_and_a_stable_descriptor(self):
        connection = self.connection
        self.assertEqual(connection.uid, os.getuid())
        fd = connection.fileno()
        self.assertGreaterEqual(fd, 0)
        storefront = connection.storefront
        self.assertIsInstance(storefront, storekit.Storefront)
        self.assertTrue(storefront.country_code)
        connection.products([COINS], timeout=TIMEOUT)
        self.assertEqual(connection.fileno(), fd)
        self.assertIn(APP, repr(connection))

    def test_products_known_and_unknown(self):
        response = self.connection.products([LEVEL_PACK, UNKNOWN, COINS], timeout=TIMEOUT)
        self.assertIsInstance(response, storekit.ProductsReceived)
        self.assertEqual([p.product_id for p in response.products], [LEVEL_PACK, COINS])
        self.assertEqual(response.invalid_identifiers, (UNKNOWN,))
        level_pack, coins = response.products
        self.assertEqual(level_pack.type, storekit.ProductType.NON_CONSUMABLE)
        self.assertEqual(coins.type, storekit.ProductType.CONSUMABLE)
        self.assertTrue(coins.title)
        self.assertTrue(coins.display_price)
        self.assertGreater(coins.price, 0)
        with self.assertRaises(Exception):
            coins.title = "changed"  # frozen

    def test_poll_loop_with_fileno_and_dispatch(self):
        recorder = Recorder()
        self.connection.set_observer(recorder)
        request = self.connection.request_products([UNKNOWN])
        with selectors.DefaultSelector() as selector:
            selector.register(self.connection.fileno(), selectors.EVENT_READ)
            for _ in range(200):
                if any(e.request_id == request for e in recorder.of(storekit.ProductsReceived)):
                    break
                selector.select(0.1)
                self.connection.dispatch()
        (answer,) = [e for e in recorder.of(storekit.ProductsReceived) if e.request_id == request]
        self.assertEqual(answer.products, ())
        self.assertEqual(answer.invalid_identifiers, (UNKNOWN,))

    def test_buy_verify_finish_removed(self):
        recorder = Recorder()
        self.connection.set_observer(recorder)
        transaction = self.connection.buy(COINS, timeout=TIMEOUT)
        self.assertIsInstance(transaction, storekit.Transaction)
        self.assertEqual(transaction.state, storekit.TransactionState.PURCHASED)
        self.assertEqual(transaction.product_id, COINS)
        self.assertEqual(transaction.quantity, 1)
        self.assertEqual(transaction.transaction_identifier, str(transaction.id))
        self.assertFalse(transaction.finished)
        self.assertIsNotNone(transaction.date)
        self.assertIsNotNone(transaction.date.tzinfo)
        self.assertIsNotNone(transaction.jws)
        # The observer saw purchasing then purchased, and the request's answer.
        states = [t.state for t in recorder.transactions(storekit.TransactionsUpdated) if t.id == transaction.id]
        self.assertEqual(states[-1], storekit.TransactionState.PURCHASED)
        self.assertTrue(any(r.ok and r.value == transaction.id for r in recorder.of(storekit.RequestResult)))

        payload = self.connection.verify_jws(transaction.jws)
        self.assertEqual(payload["transactionId"], transaction.transaction_identifier)
        self.assertEqual(payload["productId"], COINS)
        self.assertEqual(payload["bundleId"], APP)
        if ROOT:
            self.assertEqual(storekit.verify_jws(transaction.jws, ROOT), payload)
            self.assertEqual(self.connection.verify_jws(transaction.jws, root_certificate=ROOT), payload)

        self.connection.finish_and_wait(transaction, timeout=TIMEOUT)
        removed = recorder.transactions(storekit.TransactionsRemoved)
        self.assertIn(transaction.id, [t.id for t in removed])
        self.assertTrue(all(t.finished for t in removed if t.id == transaction.id))
        # Finishing again is fine (idempotent).
        self.connection.finish_and_wait(transaction.id, timeout=TIMEOUT)

    def test_unknown_product_is_refused_with_skerror_5(self):
        with self.assertRaises(storekit.PaymentError) as caught:
            self.connection.buy(UNKNOWN, timeout=TIMEOUT)
        error = caught.exception
        self.assertEqual(error.code, storekit.ErrorCode.STOREKIT)
        self.assertEqual(error.skerror_code, 5)
        self.assertEqual(error.skerror_code, storekit.SKErrorCode.STORE_PRODUCT_NOT_AVAILABLE)
        self.assertIsNone(error.transaction)
        self.assertIsInstance(error, storekit.StoreKitError)
        self.assertTrue(str(error))

    def test_quantity_out_of_range_is_refused(self):
        with self.assertRaises(storekit.StoreKitError) as caught:
            self.connection.buy(COINS, quantity=11, timeout=TIMEOUT)
        self.assertIn(caught.exception.code, (storekit.ErrorCode.BAD_ARGUMENT, storekit.ErrorCode.STOREKIT))

    def test_finishing_an_unknown_transaction(self):
        with self.assertRaises(storekit.TransactionNotFoundError) as caught:
            self.connection.finish_and_wait(987654321012345, timeout=TIMEOUT)
        self.assertEqual(caught.exception.code, storekit.ErrorCode.TRANSACTION_NOT_FOUND)
        self.assertIsNone(caught.exception.skerror_code)
        self.assertIn(storekit.strerror(storekit.ErrorCode.TRANSACTION_NOT_FOUND), str(caught.exception))

    def test_tampered_jws_does_not_verify(self):
        transaction = self.connection.buy(COINS, timeout=TIMEOUT)
        self.addCleanup(self.connection.finish_and_wait, transaction, TIMEOUT)
        jws = transaction.jws
        self.connection.verify_jws(jws)
        for part in (1, 2):
            with self.assertRaises(storekit.VerificationError) as caught:
                self.connection.verify_jws(changed(jws, part))
            self.assertIn(caught.exception.kind, (storekit.VerificationError.Kind.SIGNATURE,
                                                  storekit.VerificationError.Kind.ENCODING), f"part {part}")
            self.assertIsInstance(caught.exception, storekit.StoreKitError)
        with self.assertRaises(storekit.VerificationError) as caught:
            self.connection.verify_jws("not.a-jws")
        self.assertEqual(caught.exception.kind, storekit.VerificationError.Kind.ENCODING)
        if ROOT:
            with self.assertRaises(storekit.VerificationError):
                storekit.verify_jws(changed(jws, 1), ROOT)
        # A root that is not the daemon's: the chain does not lead to it.
        with tempfile.TemporaryDirectory() as directory:
            other = os.path.join(directory, "other-root.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-keyout", os.path.join(directory, "key.pem"), "-out", other, "-subj", "/CN=Not storekitd",
                            "-days", "1"], check=True, capture_output=True, timeout=30)
            with self.assertRaises(storekit.VerificationError) as caught:
                storekit.verify_jws(jws, other)
            self.assertEqual(caught.exception.kind, storekit.VerificationError.Kind.CHAIN)
            with self.assertRaises(storekit.VerificationError) as caught:
                storekit.verify_jws(jws, os.path.join(directory, "missing.pem"))
            self.assertEqual(caught.exception.kind, storekit.VerificationError.Kind.NO_ROOT_CERTIFICATE)

    def test_receipt_verifies_and_a_changed_one_does_not(self):
        receipt = self.connection.receipt(timeout=TIMEOUT)
        self.assertIsInstance(receipt, bytes)
        self.assertGreater(len(receipt), 100)
        self.connection.verify_receipt(receipt)
        tampered = bytearray(receipt)
        tampered[len(tampered) // 2] ^= 0xFF
        with self.assertRaises(storekit.VerificationError):
            self.connection.verify_receipt(bytes(tampered))

    def test_restore(self):
        recorder = Recorder()
        self.connection.set_observer(recorder)
        purchase = self.connection.buy(LEVEL_PACK, timeout=TIMEOUT)
        self.connection.finish_and_wait(purchase, timeout=TIMEOUT)
        restored = self.connection.restore_and_wait(timeout=TIMEOUT)
        mine = [t for t in restored if t.product_id == LEVEL_PACK]
        self.assertEqual(len(mine), 1, restored)
        self.assertEqual(mine[0].state, storekit.TransactionState.RESTORED)
        self.assertNotEqual(mine[0].id, purchase.id)
        self.assertIsNotNone(mine[0].original_id)
        for transaction in restored:
            self.connection.finish_and_wait(transaction, timeout=TIMEOUT)
        # The observer saw the restored transactions as updates.
        updated = [t.id for t in recorder.transactions(storekit.TransactionsUpdated)]
        self.assertIn(mine[0].id, updated)

    def test_observer_gets_unfinished_transactions_when_set(self):
        purchase = self.connection.buy(COINS, timeout=TIMEOUT)
        self.addCleanup(self.connection.finish_and_wait, purchase, TIMEOUT)
        with storekit.Connection(APP) as other:
            recorder = Recorder()
            other.set_observer(recorder)
            other.products([COINS], timeout=TIMEOUT)  # a request answered after the snapshot
            self.assertIn(purchase.id, [t.id for t in recorder.transactions(storekit.TransactionsUpdated)])

    def test_observer_exception_comes_out_of_wait(self):
        def observer(event):
            raise RuntimeError("from the observer")
        self.connection.set_observer(observer)
        with self.assertRaisesRegex(RuntimeError, "from the observer"):
            self.connection.products([COINS], timeout=TIMEOUT)


STOREKITCTL = os.environ.get("STOREKITCTL")


def ctl(*arguments):
    """storekitctl ARGUMENTS -o json against the test daemon (STOREKITD_CONTROL_SOCKET)."""
    result = subprocess.run([STOREKITCTL, *arguments, "-o", "json"], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise AssertionError(f"storekitctl {' '.join(arguments)} failed ({result.returncode}): {result.stderr}")
    return json.loads(result.stdout) if result.stdout.strip() else None


def wait_until(connection, condition, timeout=TIMEOUT):
    """Dispatches until condition() holds; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("the expected event did not arrive")
        connection.wait(min(remaining, 0.5))


@needs_daemon
@unittest.skipUnless(STOREKITCTL and os.environ.get("STOREKITD_CONTROL_SOCKET"),
                     "STOREKITCTL and STOREKITD_CONTROL_SOCKET are not set: the store cannot be driven")
class StoreSimulationTests(unittest.TestCase):
    """What the simulated store decides, driven with storekitctl as Xcode's SKTestSession would."""

    def setUp(self):
        self.connection = storekit.Connection(APP)
        self.addCleanup(self.connection.close)
        self.addCleanup(ctl, "reset")
        self.recorder = Recorder()
        self.connection.set_observer(self.recorder)

    def test_failed_purchase_raises_payment_error_with_the_transaction(self):
        ctl("fail-next", "paymentCancelled")
        with self.assertRaises(storekit.PaymentError) as caught:
            self.connection.buy(COINS, timeout=TIMEOUT)
        transaction = caught.exception.transaction
        self.assertIsNotNone(transaction)
        self.assertEqual(transaction.state, storekit.TransactionState.FAILED)
        self.assertEqual(transaction.error_code, storekit.SKErrorCode.PAYMENT_CANCELLED)
        self.assertEqual(caught.exception.skerror_code, 2)
        self.assertIsNone(transaction.jws)
        self.connection.finish_and_wait(transaction, timeout=TIMEOUT)

    def test_a_revoked_signing_key(self):
        transaction = self.connection.buy(COINS, timeout=TIMEOUT)
        self.addCleanup(self.connection.finish_and_wait, transaction.id, TIMEOUT)
        self.connection.verify_jws(transaction.jws)
        rotated = ctl("rotate-key", "--revoke")
        self.assertTrue(rotated["revoked"])
        # The revocation list is read beside the root: the root where the daemon publishes it.
        published = ctl("certificate")["published"][0]
        with self.assertRaises(storekit.VerificationError) as caught:
            self.connection.verify_jws(transaction.jws, root_certificate=published)
        self.assertEqual(caught.exception.code, storekit.ErrorCode.REVOKED_CERTIFICATE)
        self.assertEqual(caught.exception.kind, storekit.VerificationError.Kind.REVOKED)
        self.assertIn("revoked", str(caught.exception))
        with self.assertRaises(storekit.VerificationError):
            storekit.verify_jws(transaction.jws, published)
        # What the daemon signs now verifies.
        again = self.connection.buy(COINS, timeout=TIMEOUT)
        self.addCleanup(self.connection.finish_and_wait, again.id, TIMEOUT)
        self.assertEqual(self.connection.verify_jws(again.jws, root_certificate=published)["transactionId"],
                         again.transaction_identifier)

    def test_deferred_purchase_then_approved(self):
        ctl("ask-to-buy", "on", "--uid", str(self.connection.uid))
        with self.assertRaises(storekit.PaymentError) as caught:
            self.connection.buy(COINS, timeout=TIMEOUT)
        deferred = caught.exception.transaction
        self.assertEqual(deferred.state, storekit.TransactionState.DEFERRED)
        with self.assertRaises(storekit.NotFinishableError) as refused:
            self.connection.finish_and_wait(deferred, timeout=TIMEOUT)
        self.assertEqual(refused.exception.code, storekit.ErrorCode.NOT_FINISHABLE)

        ctl("approve", deferred.transaction_identifier)

        def approved():
            return [t for t in self.recorder.transactions(storekit.TransactionsUpdated)
                    if t.id == deferred.id and t.state == storekit.TransactionState.PURCHASED]
        wait_until(self.connection, approved)
        self.assertEqual(self.connection.verify_jws(approved()[-1].jws)["transactionId"], deferred.transaction_identifier)
        self.connection.finish_and_wait(deferred, timeout=TIMEOUT)

    def test_refund_revokes_the_entitlement(self):
        purchase = self.connection.buy(LEVEL_PACK, timeout=TIMEOUT)
        self.connection.finish_and_wait(purchase, timeout=TIMEOUT)
        ctl("refund", purchase.transaction_identifier)
        wait_until(self.connection, lambda: self.recorder.of(storekit.EntitlementsRevoked))
        self.assertIn(LEVEL_PACK, self.recorder.of(storekit.EntitlementsRevoked)[0].product_ids)

    def test_storefront_change(self):
        before = self.connection.storefront
        ctl("storefront", "set", "GBR")
        wait_until(self.connection, lambda: self.recorder.of(storekit.StorefrontChanged))
        self.assertEqual(self.recorder.of(storekit.StorefrontChanged)[-1].storefront.country_code, "GBR")
        self.assertEqual(self.connection.storefront.country_code, "GBR")
        self.assertNotEqual(before.country_code, "GBR")

    def test_promoted_purchase(self):
        ctl("promote", APP, LEVEL_PACK, "--uid", str(self.connection.uid))
        wait_until(self.connection, lambda: self.recorder.of(storekit.PromotedPurchase))
        self.assertEqual(self.recorder.of(storekit.PromotedPurchase)[0].product.product_id, LEVEL_PACK)


@needs_daemon
class ConnectFailureTests(unittest.TestCase):
    def test_unregistered_app_is_refused_at_connect(self):
        with self.assertRaises(storekit.UnknownAppError) as caught:
            storekit.Connection("org.example.not-registered")
        self.assertEqual(caught.exception.code, storekit.ErrorCode.UNKNOWN_APP)
        self.assertTrue(str(caught.exception))

    def test_no_daemon(self):
        missing = os.path.join(os.path.dirname(os.environ["STOREKITD_SOCKET"]), "missing", "storekitd.sock")
        with mock.patch.dict(os.environ, {"STOREKITD_SOCKET": missing, "STOREKIT_CONNECT_TIMEOUT": "1"}):
            with self.assertRaises(storekit.NoDaemonError) as caught:
                storekit.Connection(APP)
        self.assertEqual(caught.exception.code, storekit.ErrorCode.NO_DAEMON)
        self.assertIn(missing, str(caught.exception))


class LibraryTests(unittest.TestCase):
    def test_missing_library_is_a_clear_error(self):
        code = ("import storekit\n"
                "try:\n"
                "    storekit.Connection('com.example.game')\n"
                "except storekit.LibraryNotFoundError as error:\n"
                "    print('LibraryNotFoundError', error)\n")
        environment = dict(os.environ, STOREKIT_LIBRARY="/nonexistent/libstorekit.so.0",
                           PYTHONPATH=os.pathsep.join(sys.path))
        result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("LibraryNotFoundError", result.stdout)
        self.assertIn("/nonexistent/libstorekit.so.0", result.stdout)
        self.assertIn("STOREKIT_LIBRARY", result.stdout)

    def test_error_classes(self):
        self.assertTrue(issubclass(storekit.TimedOutError, TimeoutError))
        self.assertTrue(issubclass(storekit.PaymentError, storekit.StoreKitError))
        self.assertTrue(issubclass(storekit.LibraryNotFoundError, OSError))
        self.assertEqual(storekit.TransactionState.PURCHASED, 1)


@needs_daemon
class AsyncioTests(unittest.IsolatedAsyncioTestCase):
    async def test_end_to_end(self):
        async with storekit.aio.connect(APP) as watcher, storekit.aio.connect(APP) as buyer:
            self.assertEqual(watcher.uid, os.getuid())
            updates = watcher.updates()

            response = await buyer.products([COINS, UNKNOWN], timeout=TIMEOUT)
            self.assertEqual([p.product_id for p in response.products], [COINS])
            self.assertEqual(response.invalid_identifiers, (UNKNOWN,))

            transaction = await buyer.buy(COINS, timeout=TIMEOUT)
            self.assertEqual(transaction.state, storekit.TransactionState.PURCHASED)
            self.assertEqual(buyer.verify_jws(transaction.jws)["transactionId"], transaction.transaction_identifier)

            async def purchased_seen():
                async for update in updates:
                    if update.id == transaction.id and update.state == storekit.TransactionState.PURCHASED:
                        return update
            seen = await asyncio.wait_for(purchased_seen(), TIMEOUT)
            self.assertEqual(seen.product_id, COINS)
            self.assertIsNotNone(seen.jws)

            await buyer.finish(transaction, timeout=TIMEOUT)
            with self.assertRaises(storekit.TransactionNotFoundError):
                await buyer.finish(987654321012345, timeout=TIMEOUT)
            with self.assertRaises(storekit.PaymentError) as caught:
                await buyer.buy(UNKNOWN, timeout=TIMEOUT)
            self.assertEqual(caught.exception.skerror_code, 5)

            receipt = await watcher.receipt(timeout=TIMEOUT)
            watcher.verify_receipt(receipt)

            purchase = await buyer.buy(LEVEL_PACK, timeout=TIMEOUT)
            await buyer.finish(purchase, timeout=TIMEOUT)
            restored = await buyer.restore(timeout=TIMEOUT)
            self.assertIn(LEVEL_PACK, [t.product_id for t in restored])
            for each in restored:
                await buyer.finish(each, timeout=TIMEOUT)
            await updates.aclose()

        # Closing ends the iterator of a closed connection and refuses new ones.
        self.assertTrue(watcher.closed)
        with self.assertRaises(storekit.StoreKitError):
            watcher.updates()

    async def test_updates_end_when_the_connection_closes(self):
        connection = await storekit.aio.connect(APP)
        updates = connection.updates()

        async def drain():
            return [update async for update in updates]
        task = asyncio.ensure_future(drain())
        await asyncio.sleep(0.05)
        connection.close()
        await asyncio.wait_for(task, TIMEOUT)


if __name__ == "__main__":
    unittest.main()
