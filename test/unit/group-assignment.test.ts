import { AssignerProtocol, type GroupDescription } from 'kafkajs';
import { assignedInStableGroup } from '../../services/platform/log/kafka/group-assignment';

const assignment = (topics: Record<string, number[]>) => AssignerProtocol.MemberAssignment.encode({ version: 0, assignment: topics, userData: Buffer.alloc(0) });
const member = (memberId: string, memberAssignment: Buffer) => ({ memberId, clientId: 'c', clientHost: '/127.0.0.1', memberMetadata: Buffer.alloc(0), memberAssignment });
const group = (state: GroupDescription['state'], members: ReturnType<typeof member>[]): GroupDescription => ({ groupId: 'g', protocol: 'RoundRobinAssigner', protocolType: 'consumer', state, members });

describe('assignedInStableGroup (whether a fenced stage member still owns its partition)', () => {
  const stable = group('Stable', [member('me', assignment({ in: [0, 2], other: [1] })), member('you', assignment({ in: [1] }))]);

  test('a stable group that gives the member the partition: assigned', () => {
    expect(assignedInStableGroup(stable, 'me', 'in', 2)).toBe(true);
  });

  test('another member\'s partition, another topic\'s, or a member the group does not list: not assigned', () => {
    expect(assignedInStableGroup(stable, 'me', 'in', 1)).toBe(false);
    expect(assignedInStableGroup(stable, 'me', 'other', 0)).toBe(false);
    expect(assignedInStableGroup(stable, 'gone', 'in', 0)).toBe(false);
    expect(assignedInStableGroup(stable, null, 'in', 0)).toBe(false);
    expect(assignedInStableGroup(undefined, 'me', 'in', 0)).toBe(false);
  });

  test('a group that is rebalancing (a join follows) or an assignment that cannot be read: not assigned', () => {
    expect(assignedInStableGroup({ ...stable, state: 'PreparingRebalance' }, 'me', 'in', 0)).toBe(false);
    expect(assignedInStableGroup({ ...stable, state: 'CompletingRebalance' }, 'me', 'in', 0)).toBe(false);
    expect(assignedInStableGroup(group('Stable', [member('me', Buffer.alloc(0))]), 'me', 'in', 0)).toBe(false);
    expect(assignedInStableGroup(group('Stable', [member('me', Buffer.from([0, 0, 0, 0, 0, 9, 1]))]), 'me', 'in', 0)).toBe(false);
  });
});
