// Starts Azurite's queue or blob service with its data on disk (--location), and makes every
// change durable before Azurite answers the request that made it.
//
// Azurite keeps its metadata (queues, messages, containers, blobs, and where their bytes are)
// in LokiJS databases that it saves every 5 s (autosaveInterval in its Loki*MetadataStore),
// and LokiJS writes a save without fsync. A SIGKILL therefore lost up to 5 s of acknowledged
// messages. Message and blob bytes are already fdatasync'ed by Azurite's FSExtentStore.
// Two changes, both outside Azurite's own code:
// - every async method of the metadata stores, once it has resolved, waits until a save that
//   contains its change has completed (the handler awaits the store, so the response waits);
// - LokiJS's file adapter writes the temporary file, fsyncs it, renames it over the database
//   and fsyncs the directory, so a completed save is on disk.
// LokiJS coalesces concurrent saves (throttledSaves): a burst of requests costs few saves.
//
// Usage: node scripts/azurite.js queue|blob [azurite-queue or azurite-blob options...]
"use strict";
const fs = require("fs");
const path = require("path");
const Loki = require("lokijs");

const SERVICES = {
  queue: {
    main: "azurite/dist/src/queue/main.js",
    stores: ["azurite/dist/src/queue/persistence/LokiQueueMetadataStore"],
  },
  blob: {
    main: "azurite/dist/src/blob/main.js",
    stores: ["azurite/dist/src/blob/persistence/LokiBlobMetadataStore"],
  },
};
const EXTENT_STORE = "azurite/dist/src/common/persistence/LokiExtentMetadataStore";
// Methods that manage the store itself: init and close save on their own.
const NOT_REQUESTS = new Set(["constructor", "init", "close", "clean"]);

function fatal(what, err) {
  // In-memory state is ahead of the disk now: stop rather than acknowledge anything more.
  console.error(`azurite (durable): ${what}: ${err && err.message ? err.message : err}`);
  process.exit(1);
}

function fsyncDir(dir) {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

Loki.LokiFsAdapter.prototype.saveDatabase = function saveDatabase(dbname, dbstring, callback) {
  const tmp = `${dbname}~`;
  fs.promises
    .open(tmp, "w")
    .then(async handle => {
      try {
        await handle.writeFile(dbstring);
        await handle.datasync();
      } finally {
        await handle.close();
      }
      await fs.promises.rename(tmp, dbname);
      fsyncDir(path.dirname(dbname));
    })
    .then(() => callback(), err => fatal(`cannot save ${dbname}`, err));
};

function saved(db) {
  // Dirty: a change that no save has taken yet. Pending: a save is running that may hold a
  // change this request made (LokiJS clears the dirty flags when a save starts).
  if (!db.autosaveDirty() && !db.throttledSavePending) {
    return Promise.resolve();
  }
  return new Promise(resolve => db.saveDatabase(resolve));
}

function durableStore(modulePath) {
  const Store = require(modulePath).default;
  for (const name of Object.getOwnPropertyNames(Store.prototype)) {
    const method = Store.prototype[name];
    if (NOT_REQUESTS.has(name) || method.constructor.name !== "AsyncFunction") {
      continue;
    }
    Store.prototype[name] = async function durableMethod(...args) {
      try {
        return await method.apply(this, args);
      } finally {
        await saved(this.db);
      }
    };
  }
}

const service = SERVICES[process.argv[2]];
if (!service) {
  console.error("usage: azurite.js queue|blob [azurite options...]");
  process.exit(2);
}
for (const store of [...service.stores, EXTENT_STORE]) {
  durableStore(store);
}
const main = require.resolve(service.main);
process.argv = [process.argv[0], main, ...process.argv.slice(3)];
require(main);
