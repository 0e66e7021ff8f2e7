import { UnsettledCommits } from '../../services/platform/log/kafka/unsettled-commits';

describe('UnsettledCommits (a Kafka stage\'s committed hooks of transactions whose outcome is unknown)', () => {
  const run = (hook: () => void) => hook();

  test('a hook runs when the committed offset read later is at or past its transaction\'s offset, once', () => {
    const unsettled = new UnsettledCommits();
    const ran: string[] = [];
    unsettled.hold(0, '10', () => ran.push('at'));
    unsettled.settle(0, '10', run);
    unsettled.hold(1, '10', () => ran.push('past'));
    unsettled.settle(1, '12', run);
    expect(ran).toEqual(['at', 'past']);
    unsettled.settle(0, '10', run);
    unsettled.settle(1, '12', run);
    expect(ran).toEqual(['at', 'past']);
  });

  test('a hook is dropped when the committed offset is before its transaction\'s (nothing landed: the records come again)', () => {
    const unsettled = new UnsettledCommits();
    const ran: string[] = [];
    unsettled.hold(0, '10', () => ran.push('lost'));
    unsettled.settle(0, '9', run);
    unsettled.settle(0, '10', run);
    expect(ran).toEqual([]);
  });

  test('partitions are apart; offsets compare as numbers, not strings; a partition given away forgets its hooks', () => {
    const unsettled = new UnsettledCommits();
    const ran: string[] = [];
    unsettled.hold(0, '9', () => ran.push('p0'));
    unsettled.hold(1, '100', () => ran.push('p1'));
    unsettled.hold(2, '5', () => ran.push('p2'));
    unsettled.settle(0, '10', run);
    expect(ran).toEqual(['p0']);
    expect(unsettled.partitions().sort()).toEqual([1, 2]);
    expect([0, 1, 2].map((p) => unsettled.holds(p))).toEqual([false, true, true]);
    unsettled.forget(2);
    unsettled.settle(2, '6', run);
    unsettled.settle(1, '99', run);
    expect(ran).toEqual(['p0']);
    expect(unsettled.partitions()).toEqual([]);
  });
});
