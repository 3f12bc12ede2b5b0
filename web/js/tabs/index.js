// Every tab of the dashboard, one module each (see registry.js). Order in the nav comes
// from each tab's `order`, not from this list.
import "./overview.js";
import "./queues.js";
import "./tasks.js";
import "./workers.js";
import "./concurrency.js";
import "./rate-limits.js";
import "./groups.js";
import "./strategies.js";
import "./schedules.js";
import "./cluster.js";
