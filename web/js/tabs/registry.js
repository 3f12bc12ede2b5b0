// The tab registry. A tab is one module under js/tabs/ that calls registerTab() and is
// listed in js/tabs/index.js. Adding a tab (e.g. Groups, Strategies) touches nothing
// else: the nav, the routing (#/<id>…), live refresh and error banners come for free.
//
//   import { registerTab } from "./registry.js";
//   registerTab({
//     id: "groups",          // route segment: #/groups, #/groups/<sub>?k=v
//     title: "Groups",       // nav label and page title
//     order: 60,             // position in the nav (overview 10 … rate limits 50)
//     mount(container, ctx) {
//       // Build the view into `container`. ctx: { route, store, api, navigate, href,
//       // confirm, notify }. Return a controller:
//       return {
//         refresh() {},        // every 2 s after the shared ListQueues snapshot, also when the node
//                              // answered that with an error (may return a promise)
//         update(route) {},    // the hash changed within this tab (omit to be re-mounted)
//         unmount() {},        // leaving the tab
//       };
//     },
//   });

const tabs = new Map();

export function registerTab(tab) {
  if (!/^[a-z][a-z0-9-]*$/.test(tab.id ?? "")) throw new Error(`tab id must be a lowercase route segment, got ${tab.id}`);
  if (tabs.has(tab.id)) throw new Error(`tab ${tab.id} is registered twice`);
  if (typeof tab.mount !== "function") throw new Error(`tab ${tab.id} has no mount()`);
  tabs.set(tab.id, { order: 100, ...tab });
}

/** Registered tabs in nav order. */
export function allTabs() {
  return [...tabs.values()].sort((a, b) => a.order - b.order || a.title.localeCompare(b.title));
}

export function tabById(id) {
  return tabs.get(id);
}
