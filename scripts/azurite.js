// Starts Azurite's queue or blob service with its data on disk (--location), and makes every
// change durable before Azurite answers the request that made it.
//
// Azurite keeps its metadata (queues, messages, containers, blobs, and where their bytes are)
// in LokiJS databases that it saves every 5 s (autosaveInterval in its Loki*MetadataStore),
// and LokiJS writes a save without fsync. A SIGKILL therefore lost up to 5 s of acknowledged
// messages. Message and blob bytes are already fdatasync'ed by Azurite's FSExtentStore.
// Two changes, both outside Azurite's own code:
// - LokiJS's file adapter saves synchronously and durably: it writes a temporary file,
//   fdatasyncs it, renames it over the database and fsyncs the directory;
// - every async method of the metadata stores, once it has resolved, saves its database if
//   it has changed. The handler awaits the store before it answers, so the answer follows
//   the save; and as the save is synchronous, no other change can slip in between.
// Each save rewrites the whole database (LokiJS has no incremental file format), so its cost
// grows with the number of messages and blobs kept: see bench/local_writes.py.
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
  // Memory is ahead of the disk now: stop rather than acknowledge anything more.
  console.error(`azurite (durable): ${what}: ${err && err.message ? err.message : err}`);
  process.exit(1);
}

function writeDurably(file, text) {
  const tmp = `${file}~`;
  const fd = fs.openSync(tmp, "w");
  try {
    fs.writeFileSync(fd, text);
    fs.fdatasyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  const dir = fs.openSync(path.dirname(file), "r");
  try {
    fs.fsyncSync(dir);
  } finally {
    fs.closeSync(dir);
  }
}

Loki.LokiFsAdapter.prototype.saveDatabase = function saveDatabase(dbname, dbstring, callback) {
  try {
    writeDurably(dbname, dbstring);
  } catch (err) {
    fatal(`cannot save ${dbname}`, err);
  }
  callback();
};

// Azurite clears expired messages on every receive and peek (coll.remove(found) in
// LokiQueueMetadataStore.clearExpiredMessages), and LokiJS marks a collection changed even
// when it removes nothing: every poll of an empty queue would rewrite the database.
for (const name of ["removeBatch", "removeBatchByPositions"]) {
  const remove = Loki.Collection.prototype[name];
  Loki.Collection.prototype[name] = function removeSome(list) {
    if (list.length > 0) {
      remove.call(this, list);
    }
  };
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
        if (this.db.autosaveDirty()) {
          this.db.saveDatabase(); // synchronous with the adapter above
        }
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
