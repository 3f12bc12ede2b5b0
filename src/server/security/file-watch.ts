/**
 * Calls `onChange` once things have settled after any change in the folders holding
 * `files`: the node's TLS files and auth file are reloaded when they change, not only on
 * SIGHUP (certificate renewers such as certbot or cert-manager just write the files).
 *
 * The folders are watched, not the files: tools replace a file by writing another and
 * renaming it over the old one (a watch on the old file would go quiet), and Kubernetes
 * swaps a symlinked folder. Any event in the folder counts; the callee compares the bytes
 * with what it serves, so an unrelated file costs one read. Events are debounced: a
 * renewal writes the certificate and then the key, and a reload between the two would
 * only fail (harmlessly: the old pair stays and the next event retries).
 */
import { watch, type FSWatcher } from "node:fs";
import { dirname, resolve } from "node:path";

/** Quiet time after the last event before `onChange` runs. */
export const FILE_WATCH_SETTLE_MS = 150;
/** A folder that never goes quiet (a log file beside the certificates) still gets a check this often. */
const FILE_WATCH_MAX_WAIT_MS = 2_000;

export interface FileWatch {
  close(): void;
}

export function watchFiles(
  files: readonly string[], onChange: () => void, onError: (error: Error, folder: string) => void, settleMs = FILE_WATCH_SETTLE_MS,
): FileWatch {
  const folders = [...new Set(files.map((f) => dirname(resolve(f))))];
  let timer: NodeJS.Timeout | undefined;
  let pendingSince: number | undefined;
  const run = () => {
    timer = undefined;
    pendingSince = undefined;
    onChange();
  };
  const changed = () => {
    const now = Date.now();
    if (timer && pendingSince !== undefined && now - pendingSince >= FILE_WATCH_MAX_WAIT_MS) return;
    pendingSince ??= now;
    clearTimeout(timer);
    timer = setTimeout(run, settleMs);
    // A pending reload never keeps a stopping process alive.
    timer.unref();
  };
  const watchers: FSWatcher[] = [];
  for (const folder of folders) {
    try {
      const w = watch(folder, { persistent: false }, () => changed());
      w.on("error", (error) => onError(error, folder));
      watchers.push(w);
    } catch (error) {
      onError(error as Error, folder);
    }
  }
  return {
    close() {
      clearTimeout(timer);
      for (const w of watchers) w.close();
    },
  };
}
