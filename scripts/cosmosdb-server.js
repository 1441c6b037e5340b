// Starts @vercel/cosmosdb-server on loopback with HTTP keep-alive. Its own CLI answers every
// request with "connection: close", so each SDK call paid a new TLS handshake: with 16
// agents polling, the API spent most of its CPU setting up connections.
// With DATA_DIR, the data lives on in DATA_DIR across restarts and crashes (see
// cosmosdb-journal.js): it is loaded before the port opens, and every response waits until
// the changes before it are on disk. Without it, the data is in memory only, as the
// package keeps it.
// Usage: node scripts/cosmosdb-server.js HOST PORT [DATA_DIR]
// COSMOSDB_COMPACT_BYTES: journal size that triggers the first compaction (default 16 MiB).
"use strict";
// A point read of a missing document: the package's handler reads a property of the
// undefined document and answers 500; Cosmos DB answers 404. Answer 404, so the adapter can
// read by id here as in Azure instead of by a query, which this server answers by scanning
// the whole container (the timer's and intake's cost then grew with the runs stored).
// Patched before the router loads, which keeps a reference to the handler.
const readDocument = require("@vercel/cosmosdb-server/lib/handler/read-document");
const readDocumentAsPackaged = readDocument.default;
readDocument.default = (account, req, res, params) => {
  try {
    return readDocumentAsPackaged(account, req, res, params);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    res.statusCode = 404;
    return { code: "NotFound", message: "Entity with the specified id does not exist in the system." };
  }
};
const accountModule = require("@vercel/cosmosdb-server/lib/account");
const { createHttpsServer } = require("@vercel/cosmosdb-server");

const [host, port, dataDir] = process.argv.slice(2);
if (!host || !port) {
  console.error("usage: cosmosdb-server.js HOST PORT [DATA_DIR]");
  process.exit(2);
}
const server = createHttpsServer({ keepAlive: true });
server.keepAliveTimeout = 60000;

if (dataDir) {
  const { Journal } = require("./cosmosdb-journal");
  // The package creates its account (the root of all state) when the server starts
  // listening; hand it one already loaded from disk instead, so no request sees less.
  const hostname = host === "0.0.0.0" || host === "::" ? "localhost" : host; // as the package
  const account = new accountModule.default(hostname, Number(port));
  const started = Date.now();
  let journal;
  try {
    journal = Journal.open(dataDir, account, {
      compactBytes: Number(process.env.COSMOSDB_COMPACT_BYTES || 16 * 1024 * 1024),
    });
  } catch (err) {
    console.error(`cannot load ${dataDir}: ${err.message} (remove it to start empty)`);
    process.exit(1);
  }
  console.log(`Loaded ${journal.records} records from ${dataDir} in ${Date.now() - started} ms`);
  accountModule.default = function LoadedAccount() {
    return account;
  };
  server.prependListener("request", (req, res) => {
    const end = res.end;
    res.end = function endWhenDurable(...args) {
      journal.whenDurable(() => end.apply(res, args));
      return res;
    };
  });
}

server.listen(Number(port), host, () => {
  console.log(`Ready to accept HTTPS connections at ${host}:${port} (keep-alive)`);
});
