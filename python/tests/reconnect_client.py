"""A client that lives through a daemon restart (run by PythonClientTests, which restarts the
daemon when this prints `ready`): buys and finishes, sees Disconnected then Reconnected, is told
DisconnectedError for a request made while the daemon is away, then buys and finishes again.
Prints `ready`, `disconnected`, `reconnected ID`; exits non-zero with the reason on failure."""

import sys
import time

import storekit

APP, PRODUCT = sys.argv[1], sys.argv[2]


def wait_for(connection, condition, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            sys.exit(f"reconnect_client: no {what} within {timeout} s")
        connection.wait(0.2)


with storekit.Connection(APP) as connection:
    events = []
    connection.set_observer(events.append)
    connection.finish_and_wait(connection.buy(PRODUCT))
    fd = connection.fileno()
    print("ready", flush=True)

    wait_for(connection, lambda: any(isinstance(e, storekit.Disconnected) for e in events), "Disconnected")
    print("disconnected", flush=True)
    try:
        connection.add_payment(PRODUCT)
    except storekit.DisconnectedError:
        pass
    else:
        # The daemon may already be back: then the payment is simply made (and finished below).
        pass
    wait_for(connection, lambda: any(isinstance(e, storekit.Reconnected) for e in events), "Reconnected")
    if connection.fileno() != fd:
        sys.exit("reconnect_client: the descriptor changed across the reconnection")
    transaction = connection.buy(PRODUCT)
    connection.verify_jws(transaction.jws)
    connection.finish_and_wait(transaction)
    # Whatever else is unfinished (a payment made while reconnecting) is finished too.
    for event in list(events):
        if isinstance(event, storekit.TransactionsUpdated):
            for each in event.transactions:
                if each.state in (storekit.TransactionState.PURCHASED, storekit.TransactionState.FAILED):
                    connection.finish_and_wait(each)
    print("reconnected", transaction.transaction_identifier, flush=True)
