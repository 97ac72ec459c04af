// Package kubeapi is the small part of the Kubernetes API client that a
// topology source needs: credentials from a kubeconfig file or from the
// pod's service account, a list of one resource under a label or field
// selector, and a watch from the list's resourceVersion that resumes after
// a dropped connection and lists again after 410 Gone.
//
// It speaks JSON over net/http and decodes only the fields its callers
// ask for. Errors name the file, key or object at fault and never contain
// a token, a password or a private key.
package kubeapi
