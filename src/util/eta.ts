// Time left of a batch whose items finish at different rounds: the episodes of an evaluation (a round is one
// turn of every episode still going) or the sequences of a batched generation (a round is one decoded token).
// Items that finish early are the short ones, so "elapsed × left / done" promises the end too soon, and before
// the first item finishes it has nothing to say at all. Here a round costs in proportion to the items still in
// it (they decode together), each finishes at the rate seen so far per item-round, and no item runs past the
// round cap (the turn limit, the token budget): time left = cost per item-round × items left × rounds each
// still needs. Before any item finishes, the cap alone bounds it: an upper bound, not a guess.

export class RoundEta {
  private t0: number | null = null;
  private itemRounds = 0;
  private lastRound = -1;
  private lastActive: number;
  private lastAt = 0;

  /** `total` items, at most `maxRounds` rounds each. */
  constructor(
    readonly total: number,
    readonly maxRounds: number,
  ) {
    this.lastActive = total;
  }

  /**
   * Round `round` (counted from 0) starts with `active` items still going. The first call starts the clock, so
   * one-off work before it (loading, a first prefill) is not taken for per-round cost.
   */
  round(round: number, active: number, now = performance.now()): void {
    if (this.t0 === null) this.t0 = now;
    if (round > this.lastRound && this.lastRound >= 0) this.itemRounds += this.lastActive * (round - this.lastRound);
    if (round >= this.lastRound) {
      this.lastRound = round;
      this.lastActive = Math.max(0, Math.min(this.total, active));
      this.lastAt = now;
    }
  }

  /** Items finished so far. */
  get finished(): number {
    return this.total - this.lastActive;
  }

  /** Estimated milliseconds left; undefined until a whole round has been timed. */
  leftMs(now = performance.now()): number | undefined {
    if (this.t0 === null || this.itemRounds === 0) return undefined;
    if (this.lastActive === 0) return 0;
    const perItemRound = (this.lastAt - this.t0) / this.itemRounds;
    const roundsLeftCap = Math.max(1, this.maxRounds - this.lastRound);
    // Rounds an item still needs: one over the rate of finishing per item-round seen so far, within the cap.
    const finishedSoFar = this.total - this.lastActive;
    const roundsLeft = finishedSoFar > 0 ? Math.min(roundsLeftCap, this.itemRounds / finishedSoFar) : roundsLeftCap;
    const sinceRound = now - this.lastAt;
    return Math.max(0, perItemRound * this.lastActive * roundsLeft - sinceRound);
  }
}

/** Time left in words, as the lab's status bar and the CLIs say it. */
export function formatLeft(ms: number): string {
  return ms >= 90_000 ? `about ${Math.round(ms / 60_000)} min left` : `about ${Math.max(1, Math.round(ms / 1000))} s left`;
}
