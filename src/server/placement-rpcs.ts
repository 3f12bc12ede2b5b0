/**
 * AdminService's DrainNode and MovePartition: wire translation only; the decisions and
 * the waiting are cluster/placement-control.ts's. A single node (no etcd) has no ring to
 * change: both answer FAILED_PRECONDITION (NOT_A_CLUSTER), after the request's own
 * fields are checked, so bad input is named the same way on a single node.
 */
import { invalidField, notACluster } from "../base/errors.js";
import type { PlacementControl } from "../cluster/placement-control.js";
import { PLACEMENT_WAIT_MS_MAX } from "../cluster/placement-control.js";
import type { AdminService } from "../gen/conveyor/v1/admin_service_pb.js";
import type { UnaryImpl } from "../rpc/service-definition.js";
import { checkLength } from "./validate.js";

/** The AdminService methods this file implements. */
export type PlacementMethods = "drainNode" | "movePartition";

/** Node ids are short names; a longer one cannot be a member. */
const NODE_ID_MAX_CHARS = 256;

/** The node's placement control, linked once it has joined a cluster (never for a single node). */
export class PlacementLink {
  control: PlacementControl | undefined;
  constructor(readonly partitions: number) {}
}

export function placementRpcs(link: PlacementLink): Pick<UnaryImpl<typeof AdminService>, PlacementMethods> {
  const control = () => {
    if (!link.control) throw notACluster();
    return link.control;
  };
  return {
    async drainNode(call) {
      const { nodeId, undo, waitMs } = call.request;
      checkLength(nodeId, "node_id", NODE_ID_MAX_CHARS);
      if (nodeId === "") throw invalidField("node_id", "is required: the node to drain");
      checkWait(waitMs);
      const out = await control().drain(nodeId, undo, waitMs);
      return { ...out, waitedMs: BigInt(Math.max(0, out.waitedMs)) };
    },

    async movePartition(call) {
      const { partition, toNodeId, unpin, waitMs } = call.request;
      if (partition >= link.partitions) {
        throw invalidField("partition", `must be a partition of this cluster, 0 to ${link.partitions - 1}, got ${partition}`);
      }
      checkLength(toNodeId, "to_node_id", NODE_ID_MAX_CHARS);
      if (unpin && toNodeId !== "") throw invalidField("to_node_id", "must be empty with unpin: an unpin lets the ring place the partition again");
      if (!unpin && toNodeId === "") throw invalidField("to_node_id", "is required: the node to move the partition to (or unpin)");
      checkWait(waitMs);
      const out = await control().move(partition, toNodeId, unpin, waitMs);
      return { ...out, waitedMs: BigInt(Math.max(0, out.waitedMs)) };
    },
  };
}

function checkWait(waitMs: number): void {
  if (waitMs > PLACEMENT_WAIT_MS_MAX) throw invalidField("wait_ms", `must be at most ${PLACEMENT_WAIT_MS_MAX} (10 minutes), got ${waitMs}`);
}
