// Prints, as JSON, the partition and owner of each queue `<prefix>0` … `<prefix><count-1>` under the
// consistent-hash ring over the given node ids: the placement a node computes
// (dist/src/cluster/partitions.js), so the Python cluster tests can pick queues by owner.
// Usage: node ring_placement.mjs <prefix> <count> <id>...
import { fileURLToPath } from "node:url";
import { join, dirname } from "node:path";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const { PARTITIONS_DEFAULT, PartitionMap, partitionOf } = await import(join(repo, "dist/src/cluster/partitions.js"));

const [prefix, count, ...ids] = process.argv.slice(2);
const map = new PartitionMap(ids, PARTITIONS_DEFAULT);
const owners = {};
for (let i = 0; i < Number(count); i++) {
  const partition = partitionOf(`${prefix}${i}`, PARTITIONS_DEFAULT);
  owners[`${prefix}${i}`] = { partition, owner: map.owner(partition) };
}
process.stdout.write(`${JSON.stringify(owners)}\n`);
