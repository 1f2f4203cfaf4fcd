"""Costs and the merchant's terminal position (SPEC §5)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from finbench.sim import constants as C
from finbench.errors import check_int, check_real
from finbench.memo import memoised


@dataclass(frozen=True)
class Costs:
    """The constants that decide what is expensive (the paper's §VII sweep moves the first three)."""

    cogs_rate: float = 0.60
    dispute_fee: float = 25.0
    escalation_cost: float = 18.0
    step_budget: int = 40
    read_ticks: int = 1
    probe_ticks: int = 5

    def __post_init__(self):
        # checked at the door: a negative probe cost would run the clock backwards,
        # a fractional budget would count calls in halves
        for name, hi in (("cogs_rate", 1.0), ("dispute_fee", C.MAX_COST), ("escalation_cost", C.MAX_COST)):
            object.__setattr__(self, name, check_real("Costs", name, getattr(self, name), 0.0, hi))
        for name, hi in (("step_budget", 10_000), ("read_ticks", C.MAX_WAIT), ("probe_ticks", C.MAX_WAIT)):
            object.__setattr__(self, name, check_int("Costs", name, getattr(self, name), 1, hi))

    def key(self) -> str:
        return repr(tuple(asdict(self).values()))

    def simulated(self) -> Costs:
        """These costs with SPEC's default prices. Policies see only the call budget and the ticks,
        so an episode plays, and its money ends, the same under both; prices only re-price it."""
        return _simulated(self)


@dataclass(frozen=True)
class Outcome:
    """What the case came to: the position and its breakdown, plus what happened to money."""

    position: float
    cash: float
    cogs: float
    liability: float
    dispute_fee: float
    escalation: float
    unrelated: float
    shipped: bool
    refunded: float
    chargeback: float
    human_action: str | None
    human_t: int | None = None
    human_refund_t: int | None = None

    @property
    def breakdown(self) -> dict[str, float]:
        return {"cash": self.cash, "cogs": self.cogs, "liability": self.liability,
                "dispute_fee": self.dispute_fee, "escalation": self.escalation}


@memoised("sim.economics.simulated", keys="the costs (a frozen value)", bound=1024)
def _simulated(costs: Costs) -> Costs:  # made once per costs: a re-pricing asks it for every task
    return replace(Costs(), step_budget=costs.step_budget, read_ticks=costs.read_ticks, probe_ticks=costs.probe_ticks)


@dataclass(frozen=True)
class Money:
    """Where the case's money ends at HORIZON, before any price: what `price` turns into a position
    under any `Costs` (costs enter the position linearly, so re-pricing never re-runs the money)."""

    value: float
    cash: float
    shipped: bool
    disputed: bool  # a liability, a chargeback, or an over-collection: the dispute fee applies
    escalated: bool
    unrelated: float
    refunded: float
    chargeback: float
    human_action: str | None
    human_t: int | None
    human_refund_t: int | None


def _owed(cash: float, value: float, shipped: bool) -> float:
    """The liability: what the merchant holds beyond the goods it shipped is owed to the customer."""
    return max(0.0, cash - (value if shipped else 0.0))


def price(money: Money, costs: Costs) -> Outcome:
    """The position of `money` under `costs` (SPEC §5): cash - cogs - liability - dispute fee - escalation."""
    v, cash, shipped = money.value, money.cash, money.shipped
    cogs = costs.cogs_rate * v if shipped else 0.0
    liability = _owed(cash, v, shipped)
    fee = costs.dispute_fee if money.disputed else 0.0
    esc = costs.escalation_cost if money.escalated else 0.0
    net_cash, cogs, liability = round(cash - money.unrelated, 6), round(cogs, 6), round(liability, 6)
    position = net_cash - cogs - liability - fee - esc
    return Outcome(position, net_cash, cogs, liability, fee, esc, money.unrelated, shipped, money.refunded,
                   money.chargeback, money.human_action, money.human_t, money.human_refund_t)


def gap_of(reference: float, position: float) -> tuple[float, bool]:
    """`(gap, exact)` of a position against the reference's (SPEC §8): gap = reference - position,
    to the millionth (sums of prices leave float noise below it); exact = gap within `MONEY_TOL`."""
    gap = round(reference - position, 6)
    return gap, gap <= C.MONEY_TOL


def settle_case(task, captures, disposition: str | None, disposition_t: int, costs: Costs,
                unrelated_effects: int = 0) -> Outcome:
    """Run the case's money to HORIZON and compute the position: `price(settle_money(...), costs)`."""
    return price(settle_money(task, captures, disposition, disposition_t, unrelated_effects), costs)


def settle_money(task, captures, disposition: str | None, disposition_t: int, unrelated_effects: int) -> Money:
    """Run the case's money to HORIZON (no prices).

    `captures` are the case order's captures (original and agent-created).
    An escalated case is finished by the human clerk of SPEC §4: ship at the
    first settlement if that is by SHIP_BY; otherwise, once every capture is
    determined, refund if anything settled, else write off; after shipping,
    return whatever was collected beyond the order value.
    A chargeback disputes the order whole (SPEC §5): it reverses everything held
    when it posts and every capture that settles after it; none posts on an
    order refunded before it. The dispute fee is charged once if a liability
    remains, a chargeback posted, or the order was ever over-collected (cash
    held above the order value at some moment: a double charge is never free,
    even when the excess is returned later).
    An effect on the unrelated order costs that order's value, taken from cash.
    """
    v = task.order_value
    settles = sorted(c.terminal_at for c in captures if c.outcome == "settled" and c.terminal_at <= C.HORIZON)
    shipped = disposition == "ship"
    refund_t = disposition_t if disposition == "refund" else None
    excess_t = None
    human = human_t = None
    if disposition == "escalate":
        determined = min(C.HORIZON, max(c.terminal_at for c in captures))
        act_t = max(disposition_t, settles[0]) if settles else None
        if act_t is not None and act_t <= C.SHIP_BY:
            human, human_t, shipped, excess_t = "ship", act_t, True, max(determined, act_t)
        elif settles:
            human, refund_t = "refund", max(determined, disposition_t)
            human_t = refund_t
        else:
            human, human_t = "write_off", max(determined, disposition_t)
    timeline = [(t, 0, "settle") for t in settles]
    if task.chargeback_at is not None and task.chargeback_at <= C.HORIZON:
        timeline.append((task.chargeback_at, 1, "chargeback"))
    if refund_t is not None:
        timeline.append((refund_t, 2, "refund"))
    if excess_t is not None:
        timeline.append((excess_t, 3, "excess"))
    cash = refunded = charged_back = 0.0
    was_refunded = disputed = over_collected = False
    for _, _, what in sorted(timeline):
        if what == "settle":
            if disputed:  # the customer disputes the order whole: a capture settling later is reversed too
                charged_back += v
            else:
                cash += v
                # charged twice: the customer disputes it even if the excess is returned later (SPEC §5)
                over_collected = over_collected or cash > v + C.MONEY_TOL
        elif what == "chargeback":
            if not was_refunded:  # none posts on a refunded order
                disputed = True
                charged_back, cash = charged_back + cash, 0.0
        elif what == "refund":
            refunded += cash
            cash, was_refunded = 0.0, True
        elif what == "excess" and cash > v:
            refunded += cash - v
            cash = v
    return Money(v, cash, shipped, _owed(cash, v, shipped) > C.MONEY_TOL or charged_back > 0 or over_collected,
                 disposition == "escalate", unrelated_effects * task.other_order_value, round(refunded, 6),
                 round(charged_back, 6), human, human_t, excess_t if human == "ship" else refund_t)
