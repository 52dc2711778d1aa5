/** What vault tests read from GET .../history, and the history of an attestation opened by its lottery's winner. */

/** A history's events as `event_type:actor`, in order. */
export function historyLines(body: { events: { event_type: string; actor: string }[] }): string[] {
  return body.events.map((e) => `${e.event_type}:${e.actor}`);
}

/** A combined time lock + lottery, created by `creator`, entered and won by `winner`, unlocked by its alarm, opened by the winner. */
export function wonLotteryHistory(creator: string, winner: string): string[] {
  return [`created:${creator}`, `lottery_entered:${winner}`, `lottery_won:${winner}`, 'time_reached:system', 'unlocked:system', `content_revealed:${winner}`];
}
