import { AssignerProtocol, type GroupDescription } from 'kafkajs';

/**
 * Whether the group coordinator's description of a consumer group (DescribeGroups) gives `memberId` the
 * partition in the group's current generation.
 *
 * Only a Stable group says so: while it rebalances, the coordinator lists its members without assignments (and a
 * join follows, which tells each member what it owns). A member the group expelled is not listed at all.
 * Anything this cannot read (another protocol's assignment, a truncated one) counts as not assigned.
 */
export function assignedInStableGroup(group: GroupDescription | undefined, memberId: string | null, topic: string, partition: number): boolean {
  if (!group || group.state !== 'Stable' || !memberId) return false;
  const member = group.members.find((m) => m.memberId === memberId);
  if (!member || member.memberAssignment.length === 0) return false;
  try {
    const decoded = AssignerProtocol.MemberAssignment.decode(member.memberAssignment);
    return decoded?.assignment[topic]?.includes(partition) ?? false;
  } catch {
    return false;
  }
}
